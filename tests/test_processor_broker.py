"""The processor framework over the real embedded broker: every settlement rule of DESIGN §5."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Consumer, Producer, Transport
from react_mem.errors import BadRequest, RequestTimeout
from react_mem.ping.service import PingProcessor
from react_mem.processor.context import MessageContext
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support.ping import PingClient, flow_file
from tests.support.recording import RecordingProcessor, eventually, settled

pytestmark = pytest.mark.broker


async def start_recording(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    *,
    input_class: str = "flow",
    max_redeliveries: int = 3,
    **kwargs: object,
) -> RecordingProcessor:
    pid = f"rec-{unique}"
    topics = {"input": f"{input_class}:tg:in-{unique}", "output": f"flow:tg:out-{unique}"}
    settings = RecordingProcessor.Settings.load(
        {
            "id": pid,
            "flows": flow_file(tmp_path, pid, topics),
            "concurrency": 4,
            "max_redeliveries": max_redeliveries,
            "retry_delay": 0.01,
        }
    )
    processor = RecordingProcessor(settings, transport, registry=registry, **kwargs)  # type: ignore[arg-type]
    await processor.start()
    return processor


@contextlib.asynccontextmanager
async def ping_service(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    *,
    concurrency: int = 1,
) -> AsyncIterator[tuple[str, PingClient]]:
    """A ping processor on its own queues and a client of it: yields (processor id, client)."""
    pid = f"ping-{unique}"
    topics = {"request": f"request:tg:ping-{unique}", "response": f"response:tg:ping-{unique}"}
    settings = PingProcessor.Settings.load(
        {"id": pid, "flows": flow_file(tmp_path, pid, topics), "concurrency": concurrency}
    )
    processor = PingProcessor(settings, transport, registry=registry)
    await processor.start()
    client: PingClient = RequestResponseClient(
        transport, topics["request"], topics["response"], PingResponse, timeout=15
    )
    await client.start()
    try:
        yield pid, client
    finally:
        await client.close()
        await processor.stop()


async def test_request_response_round_trip_through_a_processor(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with ping_service(transport, registry, tmp_path, unique) as (pid, client):
        replies = await asyncio.gather(
            *(client.request(PingRequest(message=f"m{n}")) for n in range(20))
        )
        assert [r.message for r in replies] == [f"m{n}" for n in range(20)]
        assert {(r.processor, r.workspace, r.flow) for r in replies} == {(pid, "default", "f1")}
    ok = registry.get_sample_value(
        "tg_consumer_processing_total",
        {"processor": pid, "consumer": f"request:tg:ping-{unique}", "status": "ok"},
    )
    assert ok == 20  # every request counted once


async def test_malformed_message_is_answered_dead_lettered_and_consumer_keeps_serving(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    processor = await start_recording(transport, registry, tmp_path, unique)
    queue = Queue.parse(f"flow:tg:in-{unique}")
    subscription = f"{processor.id}--default--f1--input"
    dlq = await transport.consumer(dead_letter_queue(queue, subscription), "t", from_earliest=True)
    out = await transport.consumer(Queue.parse(f"flow:tg:out-{unique}"), "t", from_earliest=True)
    producer = await transport.producer(queue)
    try:
        await producer.send(b"{not json", {"id": "bad-1"})
        await producer.send(b'{"message": 42}', {"id": "bad-2"})
        await producer.send(PingRequest(message="good").encode(), {"id": "good-1"})
        replies = {}
        for _ in range(3):
            delivery = await asyncio.wait_for(out.receive(), 10)
            replies[delivery.properties["id"]] = PingResponse.decode(delivery.data)
            await out.ack(delivery)
        assert replies["good-1"].message == "good" and replies["good-1"].error is None
        for bad in ("bad-1", "bad-2"):
            error = replies[bad].error
            assert error is not None
            assert error.type in {"malformed", "invalid"} and "PingRequest" in error.message
        dead = [await asyncio.wait_for(dlq.receive(), 10) for _ in range(2)]
        assert sorted(d.data for d in dead) == sorted([b"{not json", b'{"message": 42}'])
        assert {d.properties["dlq-reason"] for d in dead} == {"invalid"}
        assert processor.done == ["good"]
    finally:
        await processor.stop()
        for endpoint in (dlq, out, producer):
            await endpoint.close()


async def test_transient_failure_is_redelivered_by_the_broker_and_processed_once(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    failures = {"flaky": 2}

    async def flaky(request: PingRequest, ctx: MessageContext) -> None:
        if failures.get(request.message, 0) > 0:
            failures[request.message] -= 1
            raise ConnectionError("store briefly unavailable")

    processor = await start_recording(transport, registry, tmp_path, unique, behaviour=flaky)
    producer = await transport.producer(Queue.parse(f"flow:tg:in-{unique}"))
    try:
        await producer.send(PingRequest(message="flaky").encode(), {"id": "x"})
        await producer.send(PingRequest(message="steady").encode(), {"id": "y"})
        await eventually(lambda: sorted(processor.done) == ["flaky", "steady"])
        await settled(processor, registry, f"flow:tg:in-{unique}")  # nothing further may arrive
        assert sorted(processor.done) == ["flaky", "steady"]
        flaky_attempts = [count for message, count in processor.attempts if message == "flaky"]
        assert flaky_attempts == [0, 1, 2]  # redelivered by the broker, counted up
    finally:
        await processor.stop()
        await producer.close()
    assert (
        registry.get_sample_value(
            "tg_consumer_redelivery_total",
            {"processor": processor.id, "consumer": f"flow:tg:in-{unique}"},
        )
        == 2
    )


async def test_message_that_always_fails_is_dead_lettered_after_the_limit(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async def broken(request: PingRequest, ctx: MessageContext) -> None:
        raise RuntimeError("handler bug")

    processor = await start_recording(
        transport, registry, tmp_path, unique, behaviour=broken, max_redeliveries=2
    )
    queue = Queue.parse(f"flow:tg:in-{unique}")
    dlq = await transport.consumer(
        dead_letter_queue(queue, f"{processor.id}--default--f1--input"), "t", from_earliest=True
    )
    out = await transport.consumer(Queue.parse(f"flow:tg:out-{unique}"), "t", from_earliest=True)
    producer = await transport.producer(queue)
    try:
        await producer.send(PingRequest(message="doomed").encode(), {"id": "d-1"})
        dead = await asyncio.wait_for(dlq.receive(), 10)
        assert PingRequest.decode(dead.data).message == "doomed"
        assert dead.properties["dlq-reason"] == "exhausted"
        assert dead.properties["dlq-attempts"] == "3"
        assert dead.properties["id"] == "d-1"
        assert "handler bug" in dead.properties["dlq-error"]
        reply = await asyncio.wait_for(out.receive(), 10)
        error = PingResponse.decode(reply.data).error
        assert error is not None and error.type == "processing-failed"
        await settled(processor, registry, queue.id)
        assert [count for _, count in processor.attempts] == [0, 1, 2]
    finally:
        await processor.stop()
        for endpoint in (dlq, out, producer):
            await endpoint.close()
    assert (
        registry.get_sample_value(
            "tg_consumer_dead_letter_total",
            {"processor": processor.id, "consumer": queue.id, "reason": "exhausted"},
        )
        == 1
    )


class SlowFirstDeadLetters:
    """The transport, with the first dead-letter producer slow to open (a RabbitMQ one takes
    several round trips: declare, bind the holding queue), counting those opened."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.dead_letter_producers = 0

    async def connect(self) -> None:
        await self.inner.connect()

    async def producer(self, queue: Queue) -> Producer:
        if queue.topic.startswith("dlq--"):
            self.dead_letter_producers += 1
            if self.dead_letter_producers == 1:
                # The slowness under test, not a wait for something: should the other
                # handlers come later than this on a loaded machine, the test passes without
                # a race; it can never fail for lack of time.
                await asyncio.sleep(0.5)
        return await self.inner.producer(queue)

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        return await self.inner.consumer(queue, subscription, from_earliest=from_earliest)

    async def close(self) -> None:
        await self.inner.close()


async def test_concurrent_dead_letters_share_one_producer_and_keep_their_order(
    transport: Transport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    slow = SlowFirstDeadLetters(transport)
    processor = await start_recording(slow, registry, tmp_path, unique)  # type: ignore[arg-type]
    queue = Queue.parse(f"flow:tg:in-{unique}")
    subscription = f"{processor.id}--default--f1--input"
    dlq = await transport.consumer(dead_letter_queue(queue, subscription), "t", from_earliest=True)
    producer = await transport.producer(queue)
    bad = [f"{{not json {n}".encode() for n in range(4)]
    try:
        for data in bad:  # four handlers (concurrency 4) fail at once
            await producer.send(data, {})
        dead = [await asyncio.wait_for(dlq.receive(), 10) for _ in bad]
        assert [d.data for d in dead] == bad
        assert slow.dead_letter_producers == 1
    finally:
        await processor.stop()
        for endpoint in (dlq, producer):
            await endpoint.close()


async def test_request_queue_failures_are_retried_in_process(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """A non-persistent queue cannot be redelivered by the broker; the retry happens here."""
    calls = {"n": 0}

    async def flaky(request: PingRequest, ctx: MessageContext) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("llm slow")

    processor = await start_recording(
        transport, registry, tmp_path, unique, input_class="request", behaviour=flaky
    )
    producer = await transport.producer(Queue.parse(f"request:tg:in-{unique}"))
    try:
        await producer.send(PingRequest(message="once").encode(), {"id": "r"})
        await eventually(lambda: processor.done == ["once"])
        assert [count for _, count in processor.attempts] == [0, 1]
    finally:
        await processor.stop()
        await producer.close()


async def test_bad_request_from_a_handler_is_answered_not_retried(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async def refuse(request: PingRequest, ctx: MessageContext) -> None:
        raise BadRequest("message too rude", type="refused")

    processor = await start_recording(transport, registry, tmp_path, unique, behaviour=refuse)
    out = await transport.consumer(Queue.parse(f"flow:tg:out-{unique}"), "t", from_earliest=True)
    producer = await transport.producer(Queue.parse(f"flow:tg:in-{unique}"))
    try:
        await producer.send(PingRequest(message="rude").encode(), {"id": "z"})
        reply = PingResponse.decode((await asyncio.wait_for(out.receive(), 10)).data)
        assert reply.error is not None and reply.error.type == "refused"
        await settled(processor, registry, f"flow:tg:in-{unique}")
        assert len(processor.attempts) == 1
    finally:
        await processor.stop()
        await out.close()
        await producer.close()


async def test_request_times_out_when_nobody_answers(
    transport: PulsarTransport, unique: str
) -> None:
    client: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport, f"request:tg:void-{unique}", f"response:tg:void-{unique}", PingResponse
    )
    await client.start()
    try:
        with pytest.raises(RequestTimeout):
            await client.request(PingRequest(message="anyone?"), timeout=0.3)
    finally:
        await client.close()


async def test_streaming_request_gets_every_response_in_order(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async def chunks(request: PingRequest, ctx: MessageContext) -> None:
        for n in range(3):
            await ctx.reply(PingResponse(message=f"chunk-{n}"))

    processor = await start_recording(
        transport, registry, tmp_path, unique, input_class="request", behaviour=chunks
    )
    client: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport, f"request:tg:in-{unique}", f"flow:tg:out-{unique}", PingResponse, timeout=5
    )
    await client.start()
    try:
        received = [
            r.message
            async for r in client.stream(
                PingRequest(message="end"), last=lambda r: r.message == "end"
            )
        ]
        assert received == ["chunk-0", "chunk-1", "chunk-2", "end"]
    finally:
        await client.close()
        await processor.stop()


async def test_a_burst_of_requests_is_not_dropped(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """Non-persistent queues drop what a consumer has no permits for; bursts must fit."""
    async with ping_service(transport, registry, tmp_path, unique, concurrency=2) as (_, client):
        replies = await asyncio.gather(
            *(client.request(PingRequest(message=str(n))) for n in range(400))
        )
        assert sorted(int(r.message) for r in replies) == list(range(400))
