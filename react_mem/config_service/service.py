"""The config service: TrustGraph's config API on ``request:tg:config``, file-backed.

Answers on ``response:tg:config`` and announces every change on ``notify:tg:config``
(after it is persisted, before the change is acknowledged), so processors that take
their flows from the config service start and stop flows as entries come and go.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.config_service.operations import WRITE_OPERATIONS, execute
from react_mem.config_service.store import ConfigStore
from react_mem.errors import ConfigurationError
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ProducerSpec
from react_mem.schema import (
    CONFIG_PUSH_QUEUE,
    CONFIG_REQUEST_QUEUE,
    CONFIG_RESPONSE_QUEUE,
    ConfigPush,
    ConfigRequest,
    ConfigResponse,
)

logger = logging.getLogger(__name__)

STATIC_FLOW = ("_", "static")


class ConfigServiceSettings(ProcessorSettings):
    #: Where the store lives; default ``{state_dir}/config``.
    data_dir: Path | None = None
    #: A flow file (``{workspace: {type: {key: value}}}``) loaded into an empty store.
    seed: Path | None = None

    group_relative: ClassVar[tuple[str, ...]] = ("flows", "seed")

    @property
    def store_dir(self) -> Path:
        return self.data_dir if self.data_dir is not None else self.state_dir / "config"


class ConfigServiceProcessor(Processor):
    """Serves get, list, getvalues, getvalues-all-ws, getkeys-all-ws, put, delete, config."""

    Settings: ClassVar[type[ProcessorSettings]] = ConfigServiceSettings
    default_id: ClassVar[str] = "config-svc"
    static_topics: ClassVar[dict[str, str] | None] = {
        "request": CONFIG_REQUEST_QUEUE,
        "response": CONFIG_RESPONSE_QUEUE,
        "push": CONFIG_PUSH_QUEUE,
    }

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        assert isinstance(self.settings, ConfigServiceSettings)
        self.config_settings = self.settings
        self._store: ConfigStore | None = None
        # Writes are serialised so pushes go out in version order.
        self._write_lock = asyncio.Lock()
        self.serve_requests(ConfigRequest, ConfigResponse, self.on_request)
        self.register_specification(ProducerSpec(name="push", schema=ConfigPush))

    @property
    def store(self) -> ConfigStore:
        if self._store is None:
            raise ConfigurationError(f"{self.id}: the config store is not open (not started)")
        return self._store

    async def start(self) -> None:
        settings = self.config_settings
        self._store = await asyncio.to_thread(ConfigStore.open, settings.store_dir, settings.seed)
        logger.info(
            "%s: config store %s at version %d", self.id, self._store.path, self._store.version
        )
        await super().start()
        # The startup poke TrustGraph's config service sends: the current version, no types.
        await self.flows[STATIC_FLOW].send("push", ConfigPush(version=self._store.version))

    async def on_request(self, request: ConfigRequest, ctx: MessageContext) -> None:
        if request.operation in WRITE_OPERATIONS:
            async with self._write_lock:
                outcome = await execute(self.store, request)
                if outcome.push is not None:
                    await ctx.flow.send("push", outcome.push)
                    logger.info(
                        "%s: config v%d pushed, changes=%s",
                        self.id,
                        outcome.push.version,
                        outcome.push.changes,
                    )
        else:
            outcome = await execute(self.store, request)
        await ctx.reply(outcome.response)
