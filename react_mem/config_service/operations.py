"""The config service's eight operations, with TrustGraph's semantics, over a store.

Reads answer with the store's current version. ``put`` and ``delete`` persist, bump the
version and produce the :class:`ConfigPush` to broadcast: ``changes`` maps each touched
type to the workspace, except for reserved workspaces (ids starting ``_``), whose changes
are never announced; entries of type ``workspace`` in ``__workspaces__`` also announce
workspace creation or deletion.

Reads take the version before the data: a write racing in its thread can then only make
the data look newer than the version, and its push (with the higher version) is not
ignored by a client that saw the read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from react_mem.config_service.store import ConfigStore
from react_mem.errors import BadRequest
from react_mem.schema import (
    ConfigPush,
    ConfigRequest,
    ConfigResponse,
    ConfigValue,
    WorkspaceChanges,
)

WORKSPACES_NAMESPACE = "__workspaces__"
WORKSPACE_TYPE = "workspace"


@dataclass(frozen=True)
class Outcome:
    response: ConfigResponse
    push: ConfigPush | None = None


Operation = Callable[[ConfigStore, ConfigRequest], Awaitable[Outcome]]


def is_reserved(workspace: str) -> bool:
    """Reserved workspaces (``__template__``, ``__workspaces__``) are stored, never pushed."""
    return workspace.startswith("_")


async def _get(store: ConfigStore, request: ConfigRequest) -> Outcome:
    version = store.version
    # A missing key answers an empty value (TrustGraph sends null, which this field's
    # wire type cannot carry), so values stay in step with the keys asked for.
    values = [
        ConfigValue(type=k.type, key=k.key, value=store.get(request.workspace, k.type, k.key) or "")
        for k in request.keys
    ]
    return Outcome(ConfigResponse(version=version, values=values))


async def _list(store: ConfigStore, request: ConfigRequest) -> Outcome:
    version = store.version
    directory = [key for key, _ in store.items(request.workspace, request.type)]
    return Outcome(ConfigResponse(version=version, directory=directory))


async def _getvalues(store: ConfigStore, request: ConfigRequest) -> Outcome:
    version = store.version
    values = [
        ConfigValue(type=request.type, key=key, value=value)
        for key, value in store.items(request.workspace, request.type)
    ]
    return Outcome(ConfigResponse(version=version, values=values))


async def _getvalues_all_ws(store: ConfigStore, request: ConfigRequest) -> Outcome:
    version = store.version
    values = [
        ConfigValue(workspace=workspace, type=request.type, key=key, value=value)
        for workspace, key, value in store.items_all_workspaces(request.type)
    ]
    return Outcome(ConfigResponse(version=version, values=values))


async def _getkeys_all_ws(store: ConfigStore, request: ConfigRequest) -> Outcome:
    version = store.version
    values = [
        ConfigValue(workspace=workspace, type=request.type, key=key)
        for workspace, key, _ in store.items_all_workspaces(request.type)
    ]
    return Outcome(ConfigResponse(version=version, values=values))


async def _config(store: ConfigStore, request: ConfigRequest) -> Outcome:
    version, config = store.workspace(request.workspace)
    return Outcome(ConfigResponse(version=version, config=config))


def _push(
    version: int,
    workspace: str,
    types: set[str],
    *,
    created: list[str] | None = None,
    deleted: list[str] | None = None,
) -> ConfigPush:
    changes = {} if is_reserved(workspace) else {t: [workspace] for t in sorted(types)}
    workspace_changes = None
    if workspace == WORKSPACES_NAMESPACE and (created or deleted):
        workspace_changes = WorkspaceChanges(created=created or [], deleted=deleted or [])
    return ConfigPush(version=version, changes=changes, workspace_changes=workspace_changes)


async def _put(store: ConfigStore, request: ConfigRequest) -> Outcome:
    entries = [(v.type, v.key, v.value) for v in request.values]
    version = await asyncio.to_thread(store.put, request.workspace, entries)
    created = [v.key for v in request.values if v.type == WORKSPACE_TYPE]
    push = _push(version, request.workspace, {v.type for v in request.values}, created=created)
    return Outcome(ConfigResponse(version=version), push)


async def _delete(store: ConfigStore, request: ConfigRequest) -> Outcome:
    keys = [(k.type, k.key) for k in request.keys]
    version = await asyncio.to_thread(store.delete, request.workspace, keys)
    deleted = [k.key for k in request.keys if k.type == WORKSPACE_TYPE]
    push = _push(version, request.workspace, {k.type for k in request.keys}, deleted=deleted)
    return Outcome(ConfigResponse(version=version), push)


#: Operations scoped to one workspace, named in the request: it must be given.
WORKSPACE_OPERATIONS: dict[str, Operation] = {
    "get": _get,
    "list": _list,
    "getvalues": _getvalues,
    "put": _put,
    "delete": _delete,
    "config": _config,
}
#: Operations across every workspace.
SYSTEM_OPERATIONS: dict[str, Operation] = {
    "getvalues-all-ws": _getvalues_all_ws,
    "getkeys-all-ws": _getkeys_all_ws,
}
WRITE_OPERATIONS = frozenset({"put", "delete"})


async def execute(store: ConfigStore, request: ConfigRequest) -> Outcome:
    """Run one request; a bad one raises :class:`BadRequest`."""
    operation = SYSTEM_OPERATIONS.get(request.operation)
    if operation is None:
        operation = WORKSPACE_OPERATIONS.get(request.operation)
        if operation is None:
            raise BadRequest(f"Bad operation {request.operation!r}", type="bad-operation")
        if not request.workspace:
            raise BadRequest(f"Workspace is required for {request.operation!r}")
    return await operation(store, request)
