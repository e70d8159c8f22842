"""One-phase processors: what start() opens reaches handlers as one value, and a handler
reached before it is open raises the one lifecycle error, which is redelivered (never
answered as bad input or bad configuration)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.errors import BadRequest, ConfigurationError, NotStarted, TransientError
from react_mem.processor.context import MessageContext
from react_mem.processor.started import Started
from react_mem.schema.ping import PingRequest, PingResponse
from tests.test_processor_broker import start_recording


def test_not_started_is_transient_not_bad_input_or_bad_config() -> None:
    assert issubclass(NotStarted, TransientError)
    assert not issubclass(NotStarted, BadRequest | ConfigurationError)


async def test_a_bound_handler_gets_the_opened_state_only_while_it_is_open() -> None:
    started: Started[dict[str, str]] = Started("svc")
    seen: list[tuple[dict[str, str], str]] = []

    async def handler(state: dict[str, str], message: str, ctx: MessageContext) -> None:
        seen.append((state, message))

    bound = started.bind(handler)
    ctx = MessageContext(flow=None, id=None)  # type: ignore[arg-type]
    with pytest.raises(NotStarted, match="svc: not started"):
        await bound("early", ctx)
    opened = started.open({"store": "open"})
    await bound("on time", ctx)
    assert seen == [(opened, "on time")]
    assert started.close() is opened
    assert started.close() is None
    with pytest.raises(NotStarted):
        await bound("late", ctx)
    assert seen == [(opened, "on time")]


@pytest.mark.broker
async def test_a_message_that_finds_its_handler_not_started_is_redelivered_then_served(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    started: Started[str] = Started("late")
    served: list[tuple[str, str]] = []

    async def use(state: str, request: PingRequest, ctx: MessageContext) -> None:
        served.append((state, request.message))

    bound = started.bind(use)

    async def behaviour(request: PingRequest, ctx: MessageContext) -> None:
        try:
            await bound(request, ctx)
        except NotStarted:
            started.open("opened")  # the part finishes starting before the redelivery
            raise

    processor = await start_recording(transport, registry, tmp_path, unique, behaviour=behaviour)
    out = await transport.consumer(Queue.parse(f"flow:tg:out-{unique}"), "t", from_earliest=True)
    producer = await transport.producer(Queue.parse(f"flow:tg:in-{unique}"))
    try:
        await producer.send(PingRequest(message="early").encode(), {"id": "e"})
        reply = PingResponse.decode((await asyncio.wait_for(out.receive(), 15)).data)
        # Answered once, by the redelivery, with the result: not an error reply.
        assert reply.error is None and reply.message == "early"
        assert [count for _, count in processor.attempts] == [0, 1]
        assert served == [("opened", "early")]
    finally:
        await processor.stop()
        await out.close()
        await producer.close()
