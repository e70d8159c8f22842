"""The agent's tools: TrustGraph's tool types from config type ``tool``, and memory tools.

A tool config value is TrustGraph's JSON: ``type`` (knowledge-query, text-completion,
mcp-tool, prompt, structured-query, row-embeddings-query, tool-service), ``name``,
``description``, and per type ``collection``, ``mcp-tool``, ``template``, ``schema-name``,
``index-name``, ``limit``, ``service`` and ``arguments`` ([{name, type, description}]);
``group``, ``state`` and ``applicable-states`` filter tools per request as TrustGraph's tool
groups do. The data-service types are in :mod:`react_mem.agent.data_tools`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from react_mem.errors import ConfigurationError, ReactMemError
from react_mem.processor.flow import Flow
from react_mem.schema.scope import Scope
from react_mem.schema.services import (
    GraphRagQuery,
    GraphRagResponse,
    PromptRequest,
    PromptResponse,
    ToolRequest,
    ToolResponse,
)

logger = logging.getLogger(__name__)

TOOL_CONFIG_TYPE = "tool"


class ToolError(ReactMemError):
    """A tool failed; the message becomes the step's observation."""


@dataclass(frozen=True)
class Argument:
    name: str
    type: str = "string"
    description: str = ""


@dataclass(frozen=True)
class ToolCall:
    """What a tool implementation gets: the flow, the request's scope, its arguments."""

    flow: Flow
    scope: Scope
    arguments: dict[str, str]
    timeout: float


Invoke = Callable[[ToolCall], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: tuple[Argument, ...]
    invoke: Invoke
    config: dict[str, Any] = field(default_factory=dict)

    def available(self, groups: list[str] | None, state: str) -> bool:
        """TrustGraph's tool-group rule: group match and state match."""
        wanted = groups if groups is not None else ["default"]
        own = _as_list(self.config.get("group", ["default"]))
        states = _as_list(self.config.get("applicable-states", ["*"]))
        group_ok = "*" in wanted or bool(set(own) & set(wanted))
        return group_ok and ("*" in states or (state or "undefined") in states)

    def next_state(self, state: str) -> str:
        return str(self.config.get("state") or state)


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _arguments(config: dict[str, Any]) -> tuple[Argument, ...]:
    return tuple(
        Argument(
            str(a.get("name", "")), str(a.get("type", "string")), str(a.get("description", ""))
        )
        for a in config.get("arguments", [])
        if isinstance(a, dict) and a.get("name")
    )


def _reply_text(text: str, obj: str) -> str:
    return text if text else obj


def knowledge_query(collection: str | None) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        query = GraphRagQuery(
            query=call.arguments.get("question", ""), collection=collection or call.scope.collection
        )
        parts: list[str] = []
        client = call.flow.client("graph-rag-request")

        def last(r: GraphRagResponse) -> bool:
            return (
                r.error is not None
                or r.end_of_session
                or (r.end_of_stream and r.message_type != "explain")
            )

        async for response in client.stream(query, last=last, timeout=call.timeout):
            if response.error is not None:
                raise ToolError(f"graph-rag: {response.error.message}")
            if response.message_type != "explain":
                parts.append(response.response)
        return "".join(parts)

    return invoke


def prompt_template(template: str, *, argument_names: tuple[str, ...] = ()) -> Invoke:
    """A prompt-service template; TrustGraph's text-completion tool is template ``question``."""

    async def invoke(call: ToolCall) -> str:
        names = argument_names or tuple(call.arguments)
        terms = {n: json.dumps(call.arguments.get(n, "")) for n in names}
        response: PromptResponse = await call.flow.client("prompt-request").request(
            PromptRequest(id=template, terms=terms), timeout=call.timeout
        )
        if response.error is not None:
            raise ToolError(f"prompt {template}: {response.error.message}")
        return _reply_text(response.text, response.object)

    return invoke


def mcp_tool(tool_id: str) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        response: ToolResponse = await call.flow.client("mcp-tool-request").request(
            ToolRequest(name=tool_id, parameters=json.dumps(call.arguments)), timeout=call.timeout
        )
        if response.error is not None:
            raise ToolError(f"mcp-tool {tool_id}: {response.error.message}")
        return _reply_text(response.text, response.object)

    return invoke


QUESTION = (Argument("question", "string", "The question to ask"),)


def tool_from_config(
    value: str | dict[str, Any], services: dict[str, dict[str, Any]] | None = None
) -> Tool:
    """One ``tool`` config entry (``services``: config type ``tool-service``, parsed);
    raises ConfigurationError naming what is wrong."""
    from react_mem.agent import data_tools

    try:
        data = json.loads(value) if isinstance(value, str) else dict(value)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"tool config is not JSON: {exc}") from exc
    name, kind = data.get("name"), data.get("type")
    if not name or not isinstance(name, str):
        raise ConfigurationError(f"tool config has no name: {data}")
    for key, expected in (("group", list), ("applicable-states", list), ("state", str)):
        if key in data and not isinstance(data[key], expected):
            raise ConfigurationError(f"tool {name}: {key!r} must be a {expected.__name__}")
    description = str(data.get("description", ""))
    if kind == "knowledge-query":
        return Tool(name, description, QUESTION, knowledge_query(data.get("collection")), data)
    if kind == "text-completion":
        return Tool(name, description, QUESTION, prompt_template("question"), data)
    if kind == "prompt":
        if not data.get("template"):
            raise ConfigurationError(f"tool {name}: type prompt needs 'template'")
        args = _arguments(data)
        invoke = prompt_template(str(data["template"]), argument_names=tuple(a.name for a in args))
        return Tool(name, description, args, invoke, data)
    if kind == "mcp-tool":
        if not data.get("mcp-tool"):
            raise ConfigurationError(f"tool {name}: type mcp-tool needs 'mcp-tool'")
        return Tool(name, description, _arguments(data), mcp_tool(str(data["mcp-tool"])), data)
    if kind == "structured-query":
        invoke = data_tools.structured_query(data.get("collection"))
        return Tool(name, description, data_tools.STRUCTURED_QUESTION, invoke, data)
    if kind == "row-embeddings-query":
        try:
            limit = int(data.get("limit", 10))
        except (TypeError, ValueError):
            raise ConfigurationError(f"tool {name}: 'limit' must be an integer") from None
        invoke = data_tools.row_embeddings_query(
            str(data.get("schema-name") or ""),
            data.get("collection"),
            data.get("index-name"),
            limit,
        )
        return Tool(name, description, data_tools.ROW_QUERY, invoke, data)
    if kind == "tool-service":
        invoke = data_tools.tool_service_invoke(name, data, services or {})
        return Tool(name, description, _arguments(data), invoke, data)
    raise ConfigurationError(f"tool {name}: type {kind!r} is not supported")


def tools_from_config(
    entries: dict[str, str], service_entries: dict[str, str] | None = None
) -> dict[str, Tool]:
    """Every valid tool of a workspace's ``tool`` config (with its ``tool-service``
    config); invalid ones are logged, skipped."""
    from react_mem.agent.data_tools import tool_services

    try:
        services = tool_services(service_entries or {})
    except ConfigurationError as exc:
        logger.error("tool-service config skipped: %s", exc)
        services = {}
    tools: dict[str, Tool] = {}
    for key, value in sorted(entries.items()):
        try:
            tool = tool_from_config(value, services)
        except ConfigurationError as exc:
            logger.error("tool %s skipped: %s", key, exc)
            continue
        tools[tool.name] = tool
    return tools
