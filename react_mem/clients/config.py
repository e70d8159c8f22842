"""The config service's client (TrustGraph's config operations, on the fixed config queues)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from react_mem.clients.base import Service, ServiceClient, build
from react_mem.schema.config import ConfigKey, ConfigRequest, ConfigResponse, ConfigValue

#: Not a flow service: its queues are ``CONFIG_REQUEST_QUEUE``/``CONFIG_RESPONSE_QUEUE``.
CONFIG: Service[ConfigRequest, ConfigResponse] = Service("config", ConfigRequest, ConfigResponse)


class ConfigClient(ServiceClient[ConfigRequest, ConfigResponse]):
    service = CONFIG

    async def get(self, workspace: str, keys: Iterable[tuple[str, str]]) -> list[ConfigValue]:
        """The values of ``(type, key)`` pairs ("" for a missing one)."""
        keyed = [ConfigKey(type=t, key=k) for t, k in keys]
        return (
            await self.call(build(ConfigRequest, operation="get", workspace=workspace, keys=keyed))
        ).values

    async def keys(self, workspace: str, type: str) -> list[str]:
        """The keys of ``type``."""
        request = build(ConfigRequest, operation="list", workspace=workspace, type=type)
        return (await self.call(request)).directory

    async def values(self, workspace: str, type: str) -> dict[str, str]:
        """Every key of ``type`` with its value (``getvalues``)."""
        request = build(ConfigRequest, operation="getvalues", workspace=workspace, type=type)
        return {v.key: v.value for v in (await self.call(request)).values}

    async def values_all_workspaces(self, type: str) -> list[ConfigValue]:
        request = build(ConfigRequest, operation="getvalues-all-ws", type=type)
        return (await self.call(request)).values

    async def keys_all_workspaces(self, type: str) -> list[ConfigValue]:
        request = build(ConfigRequest, operation="getkeys-all-ws", type=type)
        return (await self.call(request)).values

    async def config(self, workspace: str) -> ConfigResponse:
        """The whole workspace (``config``, by type and key) and its ``version``."""
        return await self.call(build(ConfigRequest, operation="config", workspace=workspace))

    async def put(self, workspace: str, values: Mapping[tuple[str, str], str]) -> int:
        """Set ``(type, key) -> value`` entries; the new version."""
        entries = [ConfigValue(type=t, key=k, value=v) for (t, k), v in values.items()]
        request = build(ConfigRequest, operation="put", workspace=workspace, values=entries)
        return (await self.call(request)).version

    async def delete(self, workspace: str, keys: Iterable[tuple[str, str]]) -> int:
        """Remove ``(type, key)`` entries; the new version."""
        keyed = [ConfigKey(type=t, key=k) for t, k in keys]
        request = build(ConfigRequest, operation="delete", workspace=workspace, keys=keyed)
        return (await self.call(request)).version
