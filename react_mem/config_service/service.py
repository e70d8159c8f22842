"""The config service: TrustGraph's config API on ``request:tg:config``, file-backed.

Answers on ``response:tg:config`` and announces every change on ``notify:tg:config``
(after it is persisted, before the change is acknowledged), so processors that take
their flows from the config service start and stop flows as entries come and go.

As TrustGraph 2.11's, it also serves each workspace on its own queues,
``request:tg:config:<workspace>`` / ``response:tg:config:<workspace>`` (what the gateway
and ``tg-put-config-item`` use): the workspace comes from the queue, not the message, and
the cross-workspace operations are refused there. A workspace is served once it has config
or is registered in ``__workspaces__``; ``default`` always is.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.config_service.operations import (
    SYSTEM_OPERATIONS,
    WORKSPACE_TYPE,
    WORKSPACES_NAMESPACE,
    WRITE_OPERATIONS,
    execute,
    is_reserved,
)
from react_mem.config_service.store import ConfigStore
from react_mem.errors import BadRequest
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.flow import FlowDefinition
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ProducerSpec
from react_mem.processor.started import Started
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
#: The name of each workspace's flow (its per-workspace queues).
WORKSPACE_FLOW = "config"
DEFAULT_WORKSPACE = "default"


def workspace_queues(workspace: str) -> FlowDefinition:
    """TrustGraph 2.11's per-workspace config queues (``config-request:<workspace>``)."""
    return FlowDefinition(
        topics={
            "request": f"{CONFIG_REQUEST_QUEUE}:{workspace}",
            "response": f"{CONFIG_RESPONSE_QUEUE}:{workspace}",
            "push": CONFIG_PUSH_QUEUE,
        }
    )


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
    #: Of the ``Settings`` class (:class:`Processor` revalidates what it is given as it).
    settings: ConfigServiceSettings
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
        self.config_settings = self.settings
        #: The store, opened by start(); handlers get it first.
        self.started: Started[ConfigStore] = Started(self.id)
        # Writes are serialised so pushes go out in version order.
        self._write_lock = asyncio.Lock()
        self.serve_requests(ConfigRequest, ConfigResponse, self.started.bind(self.on_request))
        self.register_specification(ProducerSpec(name="push", schema=ConfigPush))

    async def start(self) -> None:
        settings = self.config_settings
        store = self.started.open(
            await asyncio.to_thread(ConfigStore.open, settings.store_dir, settings.seed)
        )
        logger.info("%s: config store %s at version %d", self.id, store.path, store.version)
        await super().start()
        snapshot = store.snapshot()
        registered = snapshot.get(WORKSPACES_NAMESPACE, {}).get(WORKSPACE_TYPE, {})
        for workspace in sorted({DEFAULT_WORKSPACE, *snapshot, *registered}):
            await self.serve_workspace(workspace)
        # The startup poke TrustGraph's config service sends: the current version, no types.
        await self.flows[STATIC_FLOW].send("push", ConfigPush(version=store.version))

    async def serve_workspace(self, workspace: str) -> None:
        """Answer on ``workspace``'s own queues (reserved workspaces have none)."""
        served = (workspace, WORKSPACE_FLOW) in self.flows
        if workspace and not is_reserved(workspace) and not served:
            await self.start_flow(workspace, WORKSPACE_FLOW, workspace_queues(workspace))

    async def on_request(
        self, store: ConfigStore, request: ConfigRequest, ctx: MessageContext
    ) -> None:
        if (ctx.flow.workspace, ctx.flow.name) != STATIC_FLOW:
            # A workspace's own queue: the workspace is the queue's, whatever the body says.
            if request.operation in SYSTEM_OPERATIONS:
                raise BadRequest("Bad operation", type="bad-operation")
            request = request.model_copy(update={"workspace": ctx.flow.workspace})
        if request.operation in WRITE_OPERATIONS:
            async with self._write_lock:
                outcome = await execute(store, request)
                if outcome.push is not None:
                    await ctx.flow.send("push", outcome.push)
                    logger.info(
                        "%s: config v%d pushed, changes=%s",
                        self.id,
                        outcome.push.version,
                        outcome.push.changes,
                    )
        else:
            outcome = await execute(store, request)
        await ctx.reply(outcome.response)
        if outcome.push is not None:
            await self.serve_new_workspaces(outcome.push)

    async def serve_new_workspaces(self, push: ConfigPush) -> None:
        """Workspaces that a write created (config in a new one, or registered) are served;
        ones deregistered from ``__workspaces__`` no longer are."""
        created = push.workspace_changes.created if push.workspace_changes else []
        for workspace in {w for ws in push.changes.values() for w in ws} | set(created):
            await self.serve_workspace(workspace)
        for workspace in push.workspace_changes.deleted if push.workspace_changes else []:
            if workspace != DEFAULT_WORKSPACE:
                await self.stop_flow(workspace, WORKSPACE_FLOW)
