"""Where a processor's configuration comes from: TrustGraph's config service, or a file.

Both deliver the same shape to handlers: ``(workspace, {type: {key: value}}, version)``
with values as the JSON strings the config service stores.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml

from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Consumer, Transport
from react_mem.errors import BusError, ConfigurationError, ReactMemError, RequestTimeout
from react_mem.schema import (
    CONFIG_PUSH_QUEUE,
    CONFIG_REQUEST_QUEUE,
    CONFIG_RESPONSE_QUEUE,
    ConfigPush,
    ConfigRequest,
    ConfigResponse,
)

logger = logging.getLogger(__name__)

WorkspaceConfig = dict[str, dict[str, str]]
ConfigHandler = Callable[[str, WorkspaceConfig, int], Awaitable[None]]


def read_config_file(path: Path) -> dict[str, WorkspaceConfig]:
    """Read ``{workspace: {type: {key: value}}}``; mapping values are stored as JSON text."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"cannot read flow file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"flow file {path}: expected a mapping of workspaces")
    result: dict[str, WorkspaceConfig] = {}
    for workspace, types in data.items():
        if not isinstance(types, dict):
            raise ConfigurationError(f"flow file {path}: {workspace}: expected config types")
        result[str(workspace)] = {}
        for kind, entries in types.items():
            if not isinstance(entries, dict):
                raise ConfigurationError(f"flow file {path}: {workspace}.{kind}: expected keys")
            result[str(workspace)][str(kind)] = {
                str(k): v if isinstance(v, str) else json.dumps(v) for k, v in entries.items()
            }
    return result


class ConfigServiceSource:
    """Fetch config from ``request:tg:config`` and follow pushes on ``notify:tg:config``."""

    def __init__(
        self,
        transport: Transport,
        processor_id: str,
        handlers: list[tuple[frozenset[str], ConfigHandler]],
        *,
        timeout: float,
        on_version: Callable[[int], None],
    ) -> None:
        self._transport = transport
        self._id = processor_id
        self._handlers = handlers
        self._timeout = timeout
        self._on_version = on_version
        self.version = 0
        self._client: RequestResponseClient[ConfigRequest, ConfigResponse] = RequestResponseClient(
            transport,
            CONFIG_REQUEST_QUEUE,
            CONFIG_RESPONSE_QUEUE,
            ConfigResponse,
            subscriber=f"{processor_id}--config",
            timeout=timeout,
        )
        self._notify: Consumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._said_waiting = False

    async def start(self) -> None:
        # Subscribe to pushes before the first fetch so no change falls in between.
        notify = self._notify = await self._transport.consumer(
            Queue.parse(CONFIG_PUSH_QUEUE), f"{self._id}--config--{uuid.uuid4().hex[:12]}"
        )
        await self._client.start()
        self._task = asyncio.create_task(self._run(notify), name=f"{self._id}:config")

    async def _run(self, notify: Consumer) -> None:
        await self._until_done(self._fetch_all, "config fetch")
        while True:
            try:
                delivery = await notify.receive()
            except BusError as exc:
                logger.warning("%s: config push receive failed, retrying: %s", self._id, exc)
                await asyncio.sleep(0.5)
                continue
            try:
                push = ConfigPush.decode(delivery.data)
            except ReactMemError as exc:
                logger.error("%s: ignoring malformed config push: %s", self._id, exc)
            else:
                # A push that cannot be applied now is retried: missing it would leave
                # flows out of step with the config service until some later change.
                await self._until_done(
                    functools.partial(self._on_push, push), "applying config push"
                )
            await notify.ack(delivery)

    async def _until_done(self, attempt: Callable[[], Awaitable[None]], what: str) -> None:
        delay = 0.5
        while True:
            try:
                await attempt()
                return
            except ReactMemError as exc:  # expected (no config service yet): one line
                logger.warning("%s: %s failed, retrying in %.1fs: %s", self._id, what, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
            except Exception:
                logger.exception("%s: %s failed, retrying in %.1fs", self._id, what, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _request(self, request: ConfigRequest) -> ConfigResponse:
        """Send a (read-only, so repeatable) request, resending with growing timeouts.

        A request sent before the config service subscribes is dropped by the broker
        (request queues are non-persistent): a short first timeout finds out quickly.
        """
        timeout = min(1.0, self._timeout)
        while True:
            try:
                response = await self._client.request(request, timeout=timeout)
                break
            except RequestTimeout:
                self._say_waiting()
                if timeout >= self._timeout:
                    raise
                timeout = min(timeout * 2, self._timeout)
        if response.error is not None:
            raise BusError(f"config service: {response.error.type}: {response.error.message}")
        return response

    def _say_waiting(self) -> None:
        """Said once, at the first unanswered request: without a flow file this processor
        has no flows until a config service answers."""
        if self._said_waiting or self.version:
            return
        self._said_waiting = True
        logger.warning(
            "%s: no flows yet: waiting for the config service on %s (start the stack with "
            "`react-mem up`, or give this processor a flow file with --flows FILE)",
            self._id,
            CONFIG_REQUEST_QUEUE,
        )

    async def _fetch_workspace(self, workspace: str, kind: str) -> dict[str, str]:
        response = await self._request(
            ConfigRequest(operation="getvalues", workspace=workspace, type=kind)
        )
        return {v.key: v.value for v in response.values}

    async def _fetch_all(self) -> None:
        # The version is the oldest one read: a change landing between two reads makes a
        # later read newer than an earlier one, and its push must still be applied.
        version: int | None = None
        for types, handler in self._handlers:
            per_ws: dict[str, WorkspaceConfig] = {}
            for kind in sorted(types):
                keys = await self._request(ConfigRequest(operation="getkeys-all-ws", type=kind))
                version = keys.version if version is None else min(version, keys.version)
                for workspace in sorted({v.workspace for v in keys.values}):
                    per_ws.setdefault(workspace, {})[kind] = await self._fetch_workspace(
                        workspace, kind
                    )
            for workspace, config in per_ws.items():
                if not workspace.startswith("_"):
                    await handler(workspace, config, version or 0)
        self._set_version(version or 0)

    async def _on_push(self, push: ConfigPush) -> None:
        if push.version <= self.version:
            return
        for types, handler in self._handlers:
            per_ws: dict[str, WorkspaceConfig] = {}
            for kind in sorted(types & push.changes.keys()):
                for workspace in push.changes[kind]:
                    per_ws.setdefault(workspace, {})[kind] = await self._fetch_workspace(
                        workspace, kind
                    )
            for workspace, config in per_ws.items():
                if not workspace.startswith("_"):
                    await handler(workspace, config, push.version)
        self._set_version(push.version)

    def _set_version(self, version: int) -> None:
        self.version = version
        self._on_version(version)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._client.close()
        if self._notify is not None:
            await self._notify.close()
        self._task = self._notify = None


async def apply_config_file(
    path: Path, handlers: list[tuple[frozenset[str], ConfigHandler]]
) -> None:
    """Standalone mode: hand each handler its types from the flow file, as version 1."""
    for workspace, config in read_config_file(path).items():
        for types, handler in handlers:
            await handler(workspace, {t: config.get(t, {}) for t in types}, 1)


__all__ = ["ConfigHandler", "ConfigServiceSource", "apply_config_file", "read_config_file"]
