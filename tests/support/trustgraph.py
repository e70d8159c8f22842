"""TrustGraph 2.11's own client code (trustgraph-base, a test dependency) as the peer on
the test's broker: its Pulsar or RabbitMQ backend, config client and agent client, unchanged."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from trustgraph.base.async_config_client import AsyncConfigClient
from trustgraph.base.async_pulsar_backend import AsyncPulsarBackend

from react_mem.bus.rabbitmq import RabbitMQTransport


@contextlib.asynccontextmanager
async def trustgraph_backend(url: str, transport: object = None) -> AsyncIterator[Any]:
    """TrustGraph's async backend on the broker ``transport`` is on: its RabbitMQ backend
    on a RabbitMQ transport's node, else its Pulsar backend connected to ``url``."""
    backend: Any
    if isinstance(transport, RabbitMQTransport):
        from trustgraph.base.async_rabbitmq_backend import AsyncRabbitMQBackend

        options = transport.options
        backend = AsyncRabbitMQBackend(host=options.host, port=options.port)
    else:
        backend = AsyncPulsarBackend(host=url)
    try:
        yield backend
    finally:
        await backend.close()


@contextlib.asynccontextmanager
async def trustgraph_config(
    backend: Any, workspace: str | None = None, *, timeout: float = 20
) -> AsyncIterator[AsyncConfigClient]:
    """TrustGraph's config client on the system queue, or (``workspace`` given) on that
    workspace's own queues as TrustGraph 2.11's gateway uses them."""
    tail = f":{workspace}" if workspace is not None else ""
    client = await AsyncConfigClient.create(
        backend, f"request:tg:config{tail}", f"response:tg:config{tail}", timeout=timeout
    )
    try:
        yield client
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def trustgraph_agent(backend: Any, topics: dict[str, str]) -> AsyncIterator[Any]:
    """TrustGraph's ``AgentClient`` as its flows build it (``AgentClientSpec.register``) on
    the agent's ``request``/``response`` queues."""
    from types import SimpleNamespace

    from trustgraph.base.agent_client import AgentClientSpec

    flow = SimpleNamespace(consumer={})
    processor = SimpleNamespace(async_backend=backend, id="trustgraph-test")
    spec = AgentClientSpec(request_name="agent-request", response_name="agent-response")
    definition = {
        "topics": {"agent-request": topics["request"], "agent-response": topics["response"]}
    }
    client = await spec.register(flow, processor, definition)
    try:
        yield client
    finally:
        await client.close()


async def converse(client: Any, request: Any, *, timeout: float = 60) -> list[Any]:
    """Every ``AgentResponse`` (TrustGraph's dataclass, as its deserialiser reads it) for
    ``request``, through the dialog's end."""
    got: list[Any] = []

    async def recipient(response: Any) -> bool:
        got.append(response)
        return bool(response.end_of_dialog)

    await client.request(request, recipient=recipient, timeout=timeout)
    return got
