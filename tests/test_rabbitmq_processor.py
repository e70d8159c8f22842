"""The processor framework on a real RabbitMQ node: the Pulsar suite's settlement and
bad-input tests run here unchanged (this module gives them a RabbitMQ ``transport``), then
RabbitMQ's own faults: a broker restart, a killed consumer process, competing replicas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.bus.rabbitmq import DEAD_LETTERS, RabbitMQTransport
from react_mem.errors import BusError
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.ping import PingRequest
from tests.support.ping import flow_file
from tests.support.rabbitmq import RabbitMQNode, rabbitmq_node  # noqa: F401 (fixture)
from tests.support.recording import RecordingProcessor, eventually, settled
from tests.test_bad_input import (  # noqa: F401 (collected here, on RabbitMQ)
    test_a_failing_error_reply_settles_the_message_once,
    test_deeply_nested_flow_message_is_dead_lettered_as_invalid,
    test_deeply_nested_requests_do_not_hold_the_slots,
    test_unencodable_text_is_answered_invalid_at_once,
)
from tests.test_faults_and_cli import react_mem as react_mem_cli
from tests.test_processor_broker import (  # noqa: F401 (collected here, on RabbitMQ)
    test_a_burst_of_requests_is_not_dropped,
    test_bad_request_from_a_handler_is_answered_not_retried,
    test_malformed_message_is_answered_dead_lettered_and_consumer_keeps_serving,
    test_message_that_always_fails_is_dead_lettered_after_the_limit,
    test_request_queue_failures_are_retried_in_process,
    test_request_response_round_trip_through_a_processor,
    test_request_times_out_when_nobody_answers,
    test_streaming_request_gets_every_response_in_order,
    test_transient_failure_is_redelivered_by_the_broker_and_processed_once,
)

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
async def transport(rabbitmq_node: RabbitMQNode) -> AsyncIterator[RabbitMQTransport]:  # noqa: F811
    """Overrides the Pulsar ``transport`` for the tests imported above."""
    bus = rabbitmq_node.transport()
    await bus.connect()
    yield bus
    await bus.close()


def recording_settings(tmp_path: Path, unique: str, **extra: object) -> ProcessorSettings:
    pid = f"rec-{unique}"
    topics = {"input": f"flow:tg:in-{unique}", "output": f"flow:tg:out-{unique}"}
    return RecordingProcessor.Settings.load(
        {"id": pid, "flows": flow_file(tmp_path, pid, topics), **extra}
    )


async def send_until_accepted(bus: RabbitMQTransport, queue: str, message: str) -> None:
    """Send once the broker takes it (bounded): a send while it is away is refused."""
    producer = await bus.producer(Queue.parse(queue))
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                await producer.send(PingRequest(message=message).encode(), {"id": message})
                return
            except BusError:
                assert time.monotonic() < deadline, "the broker never came back"
                await asyncio.sleep(0.2)
    finally:
        await producer.close()


async def test_a_broker_restart_loses_nothing(tmp_path: Path, unique: str) -> None:
    """Messages held unacknowledged by the processor and messages waiting in its durable
    queue survive a restart of the node, each handled once; the same connection comes
    back by itself and goes on receiving, and a send waits for it."""
    node = RabbitMQNode(tmp_path / "node")
    node.start()
    bus = node.transport(connect_timeout=30.0, prefetch=2)
    await bus.connect()
    registry = CollectorRegistry()
    # Four handler slots, two messages prefetched: two held in hand, the rest wait queued.
    settings = recording_settings(tmp_path, unique, concurrency=4)
    queue = f"flow:tg:in-{unique}"
    release = asyncio.Event()

    async def hold_first(request: PingRequest, ctx: MessageContext) -> None:
        if request.message.startswith("held") and ctx.redelivery_count == 0:
            await release.wait()  # in hand when the broker goes, until the test ends

    processor = RecordingProcessor(settings, bus, registry=registry, behaviour=hold_first)
    expected = [
        "held-0",
        "held-1",
        *(f"{when}-{n}" for when in ("before", "after") for n in range(3)),
    ]
    producer = await bus.producer(Queue.parse(queue))
    try:
        await processor.start()
        for message in expected[:5]:
            await producer.send(PingRequest(message=message).encode(), {"id": message})
        await eventually(lambda: sorted(m for m, _ in processor.attempts) == ["held-0", "held-1"])
        await asyncio.to_thread(node.restart)
        for message in expected[5:]:  # the first waits until the connection is back
            await producer.send(PingRequest(message=message).encode(), {"id": message})
        await eventually(lambda: len(processor.done) >= len(expected), timeout=60)
        # A probe after them: RabbitMQ hands a queue out in order and puts back what comes
        # back where it was, so whatever else were still to come would come before it.
        await send_until_accepted(bus, queue, "probe")
        await eventually(lambda: "probe" in processor.done, timeout=30)
        assert sorted(processor.done) == sorted([*expected, "probe"])
        assert {("held-0", 1), ("held-1", 1)} <= set(processor.attempts)  # handed back, counted
    finally:
        release.set()
        await processor.stop()
        await producer.close()
        await bus.close()
        await asyncio.to_thread(node.shutdown)


async def test_a_killed_consumer_process_loses_nothing(
    rabbitmq_node: RabbitMQNode,  # noqa: F811
    transport: RabbitMQTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
) -> None:
    """SIGKILL while handling: RabbitMQ hands the unacknowledged message to a replica."""
    settings = recording_settings(tmp_path, unique)
    marker = tmp_path / "received"
    proc = react_mem_cli(
        "run",
        "tests.support.slow.SlowProcessor",
        "--id",
        settings.id,
        "--flows",
        str(settings.flows),
        "--pubsub-backend",
        "rabbitmq",
        "--rabbitmq-host",
        "127.0.0.1",
        "--rabbitmq-port",
        str(rabbitmq_node.port),
        "--no-metrics",
        SLOW_MARKER=str(marker),
    )
    queue = f"flow:tg:in-{unique}"
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():  # sent until one is in the subprocess's hands
            assert time.monotonic() < deadline, "the processor never received the message"
            await send_until_accepted(transport, queue, "precious")
            await asyncio.sleep(0.5)
        proc.kill()
        proc.wait(timeout=10)
        survivor = RecordingProcessor(settings, transport, registry=registry)
        await survivor.start()
        try:
            await eventually(lambda: "precious" in survivor.done, timeout=30)
            redelivered = [count for m, count in survivor.attempts if m == "precious"]
            assert max(redelivered) >= 1  # the one the killed process held, counted
        finally:
            await survivor.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


async def test_replicas_share_a_queue_and_each_message_is_handled_once(
    rabbitmq_node: RabbitMQNode,  # noqa: F811
    tmp_path: Path,
    unique: str,
) -> None:
    """Two replicas of one processor, each on its own connection (as two processes): the
    work is split between them, each message handled once."""
    settings = recording_settings(tmp_path, unique, concurrency=2)
    buses = [rabbitmq_node.transport(prefetch=2) for _ in range(2)]
    replicas = []
    registries = [CollectorRegistry() for _ in buses]

    async def slow(request: PingRequest, ctx: MessageContext) -> None:
        # Time for the other replica to take the next one: the spread under test, not a wait
        # for something (should one replica take all, "both took a share" says so).
        await asyncio.sleep(0.02)

    for bus, registry in zip(buses, registries, strict=True):
        await bus.connect()
        replica = RecordingProcessor(settings, bus, registry=registry, behaviour=slow)
        await replica.start()
        replicas.append(replica)
    try:
        for n in range(20):
            await send_until_accepted(buses[0], f"flow:tg:in-{unique}", str(n))
        await eventually(lambda: sum(len(r.done) for r in replicas) >= 20, timeout=30)
        for replica, registry in zip(replicas, registries, strict=True):
            await settled(replica, registry, f"flow:tg:in-{unique}")  # nothing further
        handled = [m for r in replicas for m in r.done]
        assert sorted(handled, key=int) == [str(n) for n in range(20)]
        assert all(r.done for r in replicas)  # both took a share
    finally:
        for replica in replicas:
            await replica.stop()
        for bus in buses:
            await bus.close()


async def test_dead_letters_wait_in_a_durable_queue_nobody_subscribed_to(
    transport: RabbitMQTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """RabbitMQ drops what reaches an exchange with no queue bound: the dead-letter
    exchange has its own durable queue, bound before the first dead letter is sent."""
    settings = recording_settings(tmp_path, unique)
    processor = RecordingProcessor(settings, transport, registry=registry)
    await processor.start()
    queue = Queue.parse(f"flow:tg:in-{unique}")
    try:
        await send_raw(transport, queue, b"{not json")
        await eventually(
            lambda: bool(
                registry.get_sample_value(
                    "tg_consumer_dead_letter_total",
                    {"processor": processor.id, "consumer": queue.id, "reason": "invalid"},
                )
            )
        )
    finally:
        await processor.stop()
    subscription = f"{processor.id}--default--f1--input"
    held = await transport.consumer(dead_letter_queue(queue, subscription), DEAD_LETTERS)
    try:
        dead = await asyncio.wait_for(held.receive(), 10)
        assert dead.data == b"{not json" and dead.properties["dlq-reason"] == "invalid"
        await held.ack(dead)
    finally:
        await held.close()


async def send_raw(bus: RabbitMQTransport, queue: Queue, data: bytes) -> None:
    producer = await bus.producer(queue)
    try:
        await producer.send(data, {"id": "raw"})
    finally:
        await producer.close()


async def test_a_consumer_holds_at_most_its_prefetch_unsettled(
    rabbitmq_node: RabbitMQNode,  # noqa: F811
    unique: str,
) -> None:
    """With prefetch 1 (a processor of concurrency 1) a busy replica takes nothing more:
    the next message goes to the idle one."""
    queue = Queue.parse(f"flow:tg:prefetch-{unique}")
    busy_bus, idle_bus = rabbitmq_node.transport(prefetch=1), rabbitmq_node.transport(prefetch=1)
    for bus in (busy_bus, idle_bus):
        await bus.connect()
    try:
        busy = await busy_bus.consumer(queue, "workers")
        producer = await busy_bus.producer(queue)
        await producer.send(b"first", {})
        held = await asyncio.wait_for(busy.receive(), 10)  # in hand, not acknowledged
        idle = await idle_bus.consumer(queue, "workers")
        for body in (b"second", b"third"):
            await producer.send(body, {})
        for body in (b"second", b"third"):  # both: none waits behind the busy one
            delivery = await asyncio.wait_for(idle.receive(), 10)
            assert delivery.data == body
            await idle.ack(delivery)
        await busy.ack(held)
    finally:
        await busy_bus.close()
        await idle_bus.close()
