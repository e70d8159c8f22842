"""agent-manager 2.11's tool types over TrustGraph's data services: ``structured-query``,
``row-embeddings-query`` and ``tool-service`` (a service named in config type
``tool-service``, on its own queues). Spec names, arguments and observations are
agent-manager's."""

from __future__ import annotations

import json
from typing import Any

from react_mem.agent.tools import Argument, Invoke, ToolCall, ToolError
from react_mem.bus.rpc import RequestResponseClient
from react_mem.errors import ConfigurationError
from react_mem.schema.services import (
    EmbeddingsRequest,
    EmbeddingsResponse,
    RowEmbeddingsRequest,
    RowEmbeddingsResponse,
    StructuredQueryRequest,
    StructuredQueryResponse,
    ToolServiceRequest,
    ToolServiceResponse,
)

#: agent-manager's client specs for these tools: (service, request, response schemas).
CLIENTS: tuple[tuple[str, type[Any], type[Any]], ...] = (
    ("structured-query", StructuredQueryRequest, StructuredQueryResponse),
    ("embeddings", EmbeddingsRequest, EmbeddingsResponse),
    ("row-embeddings-query", RowEmbeddingsRequest, RowEmbeddingsResponse),
)
TOOL_SERVICE_CONFIG_TYPE = "tool-service"

STRUCTURED_QUESTION = (
    Argument(
        "question",
        "string",
        "Natural language question about structured data (tables, databases, etc.)",
    ),
)
ROW_QUERY = (
    Argument(
        "query",
        "string",
        "Text to search for semantically similar values in the structured data index",
    ),
)


def structured_query(collection: str | None) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        response: StructuredQueryResponse = await call.flow.client(
            "structured-query-request"
        ).request(
            StructuredQueryRequest(
                question=call.arguments.get("question", ""),
                collection=collection or "default",
            ),
            timeout=call.timeout,
        )
        if response.error is not None:
            raise ToolError(f"structured-query: {response.error.message}")
        if not response.data:
            errors = f": {'; '.join(response.errors)}" if response.errors else ""
            return f"No data returned{errors}"
        try:  # the GraphQL data, pretty-printed (agent-manager quotes the JSON string)
            return json.dumps(json.loads(response.data), indent=2)
        except json.JSONDecodeError:
            return response.data

    return invoke


def row_embeddings_query(
    schema_name: str, collection: str | None, index_name: str | None, limit: int
) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        embedded: EmbeddingsResponse = await call.flow.client("embeddings-request").request(
            EmbeddingsRequest(texts=[call.arguments.get("query", "")]), timeout=call.timeout
        )
        if embedded.error is not None:
            raise ToolError(f"embeddings: {embedded.error.message}")
        found: RowEmbeddingsResponse = await call.flow.client(
            "row-embeddings-query-request"
        ).request(
            RowEmbeddingsRequest(
                vector=embedded.vectors[0] if embedded.vectors else [],
                schema_name=schema_name,
                collection=collection or "default",
                index_name=index_name or None,
                limit=limit,
            ),
            timeout=call.timeout,
        )
        if found.error is not None:
            raise ToolError(f"row-embeddings-query: {found.error.message}")
        if not found.matches:
            return "No matching records found"
        lines = [
            f"- {m.index_name}: {', '.join(m.index_value)} (score: {m.score:.3f})"
            for m in found.matches
        ]
        return "Matching records:\n" + "\n".join(lines)

    return invoke


def tool_service(request_queue: str, response_queue: str, config: dict[str, Any]) -> Invoke:
    """A call on the tool service's own queues (not the flow's): a client per call."""

    async def invoke(call: ToolCall) -> str:
        client: RequestResponseClient[ToolServiceRequest, ToolServiceResponse] = (
            RequestResponseClient(
                call.flow.processor.transport,
                request_queue,
                response_queue,
                ToolServiceResponse,
                subscriber=call.flow.processor.id,
                timeout=call.timeout,
            )
        )
        request = ToolServiceRequest(
            config=json.dumps(config) if config else "{}",
            arguments=json.dumps(call.arguments) if call.arguments else "{}",
        )
        await client.start()
        try:
            parts: list[str] = []
            async for response in client.stream(
                request, last=lambda r: r.error is not None or r.end_of_stream
            ):
                if response.error is not None:
                    raise ToolError(f"tool-service: {response.error.message}")
                parts.append(response.response)
            return "".join(parts)
        finally:
            await client.close()

    return invoke


def tool_service_invoke(name: str, data: dict[str, Any], services: dict[str, Any]) -> Invoke:
    """agent-manager's checks: the service is named and configured with both queues, and
    every required config parameter is given by the tool."""
    ref = data.get("service")
    if not ref:
        raise ConfigurationError(f"tool {name}: type tool-service needs 'service'")
    if ref not in services:
        raise ConfigurationError(f"tool {name}: unknown tool-service {ref!r}")
    service = services[ref]
    request_queue, response_queue = service.get("request-queue"), service.get("response-queue")
    if not request_queue or not response_queue:
        raise ConfigurationError(
            f"tool-service {ref!r} must define 'request-queue' and 'response-queue'"
        )
    config: dict[str, Any] = {}
    for param in service.get("config-params", []):
        param_name = param.get("name") if isinstance(param, dict) else param
        if param_name in data:
            config[param_name] = data[param_name]
        elif isinstance(param, dict) and param.get("required", False):
            raise ConfigurationError(f"tool {name}: missing required config param {param_name!r}")
    return tool_service(str(request_queue), str(response_queue), config)


def tool_services(entries: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Config type ``tool-service``: each value a JSON object; bad ones are refused."""
    services: dict[str, dict[str, Any]] = {}
    for key, value in entries.items():
        try:
            data = json.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"tool-service {key} is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigurationError(f"tool-service {key} is not a JSON object")
        services[key] = data
    return services
