"""Config-service messages (TrustGraph ``schema/services/config.py``)."""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel
from react_mem.schema.primitives import Error

CONFIG_REQUEST_QUEUE = "request:tg:config"
CONFIG_RESPONSE_QUEUE = "response:tg:config"
CONFIG_PUSH_QUEUE = "notify:tg:config"


class ConfigKey(WireModel):
    type: str = ""
    key: str = ""


class ConfigValue(WireModel):
    type: str = ""
    key: str = ""
    value: str = ""
    workspace: str = ""


class ConfigRequest(WireModel):
    """Operations: get, list, getvalues, getvalues-all-ws, getkeys-all-ws, put, delete, config."""

    operation: str = ""
    workspace: str = ""
    keys: list[ConfigKey] = Field(default_factory=list)
    type: str = ""
    values: list[ConfigValue] = Field(default_factory=list)


class ConfigResponse(WireModel):
    version: int = 0
    values: list[ConfigValue] = Field(default_factory=list)
    directory: list[str] = Field(default_factory=list)
    config: dict[str, dict[str, str]] = Field(default_factory=dict)
    error: Error | None = None


class WorkspaceChanges(WireModel):
    created: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)


class ConfigPush(WireModel):
    """Notification that config changed: ``changes`` maps config type to workspaces."""

    version: int = 0
    changes: dict[str, list[str]] = Field(default_factory=dict)
    workspace_changes: WorkspaceChanges | None = None
