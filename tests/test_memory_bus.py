"""The framework's settlement rules on the in-memory transport (fast; no broker).

The delivery rules every transport shares are in ``test_transport_contract.py``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.in_process import InProcessTransport
from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.errors import BusError
from react_mem.processor.context import MessageContext
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support.recording import RecordingProcessor, eventually


def make(tmp_path: Path, bus: InProcessTransport, **behaviour: object) -> RecordingProcessor:
    flows = tmp_path / "flows.yaml"
    topics = {"input": "flow:tg:in", "output": "flow:tg:out"}
    flows.write_text(json.dumps({"ws": {"processor:rec": {"f": {"topics": topics}}}}))
    settings = RecordingProcessor.Settings.load(
        {"id": "rec", "flows": flows, "max_redeliveries": 2, "retry_delay": 0}
    )
    return RecordingProcessor(settings, bus, registry=CollectorRegistry(), **behaviour)  # type: ignore[arg-type]


async def test_exclusive_subscription_refuses_a_second_consumer() -> None:
    # Not in the contract: the embedded broker answers only after its operation timeout.
    bus = InProcessTransport()
    queue = Queue.parse("response:tg:x")
    await bus.consumer(queue, "mine")
    with pytest.raises(BusError):
        await bus.consumer(queue, "mine")


async def test_processor_retries_then_dead_letters_on_the_memory_bus(tmp_path: Path) -> None:
    async def broken(request: PingRequest, ctx: MessageContext) -> None:
        raise RuntimeError("no")

    bus = InProcessTransport()
    processor = make(tmp_path, bus, behaviour=broken)
    dlq = await bus.consumer(dead_letter_queue(Queue.parse("flow:tg:in"), "rec--ws--f--input"), "t")
    out = await bus.consumer(Queue.parse("flow:tg:out"), "t")
    await processor.start()
    try:
        await (await bus.producer(Queue.parse("flow:tg:in"))).send(
            PingRequest(message="m").encode(), {"id": "1"}
        )
        dead = await asyncio.wait_for(dlq.receive(), 2)
        assert dead.properties["dlq-attempts"] == "3"
        reply = PingResponse.decode((await asyncio.wait_for(out.receive(), 2)).data)
        assert reply.error is not None and reply.error.type == "processing-failed"
        await eventually(lambda: len(processor.attempts) == 3, timeout=2)
    finally:
        await processor.stop()


async def test_message_is_kept_when_the_dead_letter_queue_is_unreachable(tmp_path: Path) -> None:
    async def broken(request: PingRequest, ctx: MessageContext) -> None:
        raise RuntimeError("no")

    bus = InProcessTransport()
    dlq_queue = dead_letter_queue(Queue.parse("flow:tg:in"), "rec--ws--f--input")
    real_producer = bus.producer
    refusals = {"left": 2}

    async def flaky_producer(queue: Queue) -> object:
        if queue == dlq_queue and refusals["left"] > 0:
            refusals["left"] -= 1
            raise BusError("dead-letter topic unavailable")
        return await real_producer(queue)

    bus.producer = flaky_producer  # type: ignore[method-assign,assignment]
    processor = make(tmp_path, bus, behaviour=broken)
    dlq = await bus.consumer(dlq_queue, "t")
    await processor.start()
    try:
        await (await real_producer(Queue.parse("flow:tg:in"))).send(
            PingRequest(message="m").encode(), {}
        )
        dead = await asyncio.wait_for(dlq.receive(), 5)
        assert PingRequest.decode(dead.data).message == "m"
        assert refusals["left"] == 0
    finally:
        await processor.stop()
