"""The transport contract: every transport (the Pulsar one over the embedded broker, the
RabbitMQ one over a private node, the in-memory one) delivers, settles and subscribes by the same rules the framework relies on.

A new transport joins ``TRANSPORTS``; ``test_every_backend_is_held_to_the_contract`` fails
until it does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from react_mem.bus.backends import BACKENDS
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.in_process import InProcessTransport
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rabbitmq import RabbitMQTransport
from react_mem.bus.transport import Consumer, Delivery, Transport, send_queued
from react_mem.errors import BusError, ConsumerClosed
from tests.support.rabbitmq import RabbitMQNode, rabbitmq_node  # noqa: F401 (fixture)

#: The transports under contract; those needing a real broker are marked ``broker``.
TRANSPORTS = {
    "pulsar": [pytest.mark.broker],
    "rabbitmq": [pytest.mark.rabbitmq],
    "memory": [],
}
ALL_CLASSES = ["flow", "request", "response", "notify"]
SHARED_CLASSES = ["flow", "request"]

#: Bounds every wait so a broken transport fails the test instead of hanging it.
WAIT = 10.0


@pytest.fixture(params=[pytest.param(name, marks=marks) for name, marks in TRANSPORTS.items()])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    transport: Transport
    if request.param == "pulsar":
        broker: EmbeddedBroker = request.getfixturevalue("broker")
        transport = PulsarTransport(
            PulsarOptions(url=broker.url, nack_delay=0.05, connect_timeout=10)
        )
    elif request.param == "rabbitmq":
        node: RabbitMQNode = request.getfixturevalue("rabbitmq_node")
        transport = node.transport()
    else:
        transport = InProcessTransport()
    await transport.connect()
    yield transport
    await transport.close()


async def receive(consumer: Consumer) -> Delivery:
    return await asyncio.wait_for(consumer.receive(), WAIT)


async def drain(consumers: Sequence[Consumer], count: int) -> list[bytes]:
    """Receive and ack ``count`` messages from whichever consumers they reach."""
    got: list[bytes] = []
    enough = asyncio.Event()

    async def take(consumer: Consumer) -> None:
        while True:
            delivery = await consumer.receive()
            got.append(delivery.data)
            await consumer.ack(delivery)
            if len(got) >= count:
                enough.set()

    tasks = [asyncio.create_task(take(c)) for c in consumers]
    try:
        await asyncio.wait_for(enough.wait(), WAIT)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return got


def test_every_backend_is_held_to_the_contract() -> None:
    assert set(BACKENDS) <= set(TRANSPORTS)


@pytest.mark.parametrize("cls", ALL_CLASSES)
async def test_a_message_arrives_with_its_body_and_properties(
    bus: Transport, unique: str, cls: str
) -> None:
    queue = Queue.parse(f"{cls}:tg:round-trip-{unique}")
    consumer = await bus.consumer(queue, f"sub-{unique}")
    producer = await bus.producer(queue)
    properties = {"id": "r-1", "note": "naïve ✓", "empty": ""}
    await producer.send(b'{"q": "\xc3\xa9"}', properties)
    delivery = await receive(consumer)
    assert (delivery.data, delivery.properties) == (b'{"q": "\xc3\xa9"}', properties)
    assert delivery.redelivery_count == 0
    await consumer.ack(delivery)


async def test_an_acknowledged_message_is_not_delivered_again(bus: Transport, unique: str) -> None:
    queue = Queue.parse(f"flow:tg:ack-{unique}")
    consumer = await bus.consumer(queue, "s")
    producer = await bus.producer(queue)
    await producer.send(b"first", {})
    await consumer.ack(await receive(consumer))
    await consumer.close()
    consumer = await bus.consumer(queue, "s")
    await producer.send(b"second", {})
    assert (await receive(consumer)).data == b"second"


async def test_a_nacked_message_comes_back_counted(bus: Transport, unique: str) -> None:
    queue = Queue.parse(f"flow:tg:nack-{unique}")
    consumer = await bus.consumer(queue, "s")
    await (await bus.producer(queue)).send(b"m", {"id": "7"})
    counts = []
    for _ in range(3):
        delivery = await receive(consumer)
        assert (delivery.data, delivery.properties) == (b"m", {"id": "7"})
        counts.append(delivery.redelivery_count)
        if len(counts) < 3:
            await consumer.nack(delivery)
    await consumer.ack(delivery)
    assert counts == [0, 1, 2]


async def test_an_unsettled_message_goes_to_the_next_consumer(bus: Transport, unique: str) -> None:
    queue = Queue.parse(f"flow:tg:unsettled-{unique}")
    consumer = await bus.consumer(queue, "s")
    await (await bus.producer(queue)).send(b"m", {})
    assert (await receive(consumer)).redelivery_count == 0
    await consumer.close()  # a replica dies holding it
    again = await receive(await bus.consumer(queue, "s"))
    assert again.data == b"m" and again.redelivery_count >= 1


@pytest.mark.parametrize("cls", SHARED_CLASSES)
async def test_a_shared_subscription_delivers_each_message_once(
    bus: Transport, unique: str, cls: str
) -> None:
    queue = Queue.parse(f"{cls}:tg:shared-{unique}")
    replicas = [await bus.consumer(queue, "workers") for _ in range(2)]
    producer = await bus.producer(queue)
    sent = [str(n).encode() for n in range(8)]
    for body in sent:
        await producer.send(body, {})
    assert sorted(await drain(replicas, len(sent))) == sorted(sent)


@pytest.mark.parametrize("cls", ALL_CLASSES)
async def test_every_subscription_gets_its_own_copy(bus: Transport, unique: str, cls: str) -> None:
    queue = Queue.parse(f"{cls}:tg:copies-{unique}")
    first, second = await bus.consumer(queue, "a"), await bus.consumer(queue, "b")
    await (await bus.producer(queue)).send(b"m", {"id": "1"})
    for consumer in (first, second):
        delivery = await receive(consumer)
        assert (delivery.data, delivery.properties) == (b"m", {"id": "1"})
        await consumer.ack(delivery)


async def test_from_earliest_starts_at_the_oldest_held_message(bus: Transport, unique: str) -> None:
    if isinstance(bus, RabbitMQTransport):
        pytest.skip("a RabbitMQ subscription is a queue: a new one holds only what follows it")
    queue = Queue.parse(f"flow:tg:earliest-{unique}")
    await bus.consumer(queue, "holder")  # holds the backlog, as a slow subscriber would
    producer = await bus.producer(queue)
    await producer.send(b"old", {})
    latest = await bus.consumer(queue, "latest")
    earliest = await bus.consumer(queue, "earliest", from_earliest=True)
    await producer.send(b"new", {})
    assert (await receive(latest)).data == b"new"
    assert [(await receive(earliest)).data for _ in range(2)] == [b"old", b"new"]


async def test_a_closed_exclusive_subscription_can_be_taken_again(
    bus: Transport, unique: str
) -> None:
    queue = Queue.parse(f"response:tg:retake-{unique}")
    await (await bus.consumer(queue, "client")).close()
    consumer = await bus.consumer(queue, "client")
    await (await bus.producer(queue)).send(b"reply", {"id": "1"})
    assert (await receive(consumer)).data == b"reply"


async def test_a_closed_producer_refuses_to_send(bus: Transport, unique: str) -> None:
    producer = await bus.producer(Queue.parse(f"flow:tg:closed-{unique}"))
    await producer.close()
    with pytest.raises(BusError):
        await producer.send(b"m", {})


@pytest.mark.parametrize("cls", ALL_CLASSES)
async def test_queued_sends_arrive_in_the_order_they_were_queued(
    bus: Transport, unique: str, cls: str
) -> None:
    queue = Queue.parse(f"{cls}:tg:queued-{unique}")
    consumer = await bus.consumer(queue, "s")
    producer = await bus.producer(queue)
    sent = [str(n).encode() for n in range(40)]
    receipts = [await send_queued(producer, body, {"id": body.decode()}) for body in sent]
    await asyncio.wait_for(asyncio.gather(*receipts), WAIT)
    got = []
    for _ in sent:
        delivery = await receive(consumer)
        got.append((delivery.data, delivery.properties["id"]))
        await consumer.ack(delivery)
    assert got == [(body, body.decode()) for body in sent]


async def test_a_pulsar_queued_send_returns_before_its_receipt(bus: Transport, unique: str) -> None:
    """What lets a stream's messages go out without each waiting for the one before."""
    if not isinstance(bus, PulsarTransport):
        pytest.skip("the other transports send each message whole (their receipt is in)")
    producer = await bus.producer(Queue.parse(f"response:tg:queued-{unique}"))
    first = await send_queued(producer, b"1", {})
    second = await send_queued(producer, b"2", {})
    assert not first.done() and not second.done()
    await asyncio.wait_for(asyncio.gather(first, second), WAIT)


async def test_a_closed_producer_refuses_a_queued_send(bus: Transport, unique: str) -> None:
    producer = await bus.producer(Queue.parse(f"flow:tg:closed-queued-{unique}"))
    await producer.close()
    with pytest.raises(BusError):
        await asyncio.wait_for(await send_queued(producer, b"m", {}), WAIT)


async def test_a_closed_consumer_refuses_to_receive(bus: Transport, unique: str) -> None:
    consumer = await bus.consumer(Queue.parse(f"flow:tg:closed-{unique}"), "s")
    await consumer.close()
    # Its own error, so receive loops end instead of retrying a consumer that cannot recover.
    with pytest.raises(ConsumerClosed):
        await receive(consumer)


async def test_a_closed_transport_refuses_to_send(bus: Transport, unique: str) -> None:
    producer = await bus.producer(Queue.parse(f"flow:tg:closed-{unique}"))
    await bus.close()
    with pytest.raises(BusError):
        await producer.send(b"m", {})


async def test_responses_end_when_their_consumer_is_closed_under_them(
    bus: Transport, unique: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker closes a consumer whose topic it deleted (TrustGraph's flow service deletes a
    stopped flow's topics): the client's response loop ends, it does not retry forever."""
    from react_mem.bus.rpc import RequestResponseClient
    from react_mem.schema import AgentResponse

    client: RequestResponseClient[AgentResponse, AgentResponse] = RequestResponseClient(
        bus, f"request:tg:rr-{unique}", f"response:tg:rr-{unique}", AgentResponse
    )
    await client.start()
    assert client._consumer is not None and client._receiver is not None
    await client._consumer.close()
    await asyncio.wait_for(client._receiver, 10)
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    await client.close()
