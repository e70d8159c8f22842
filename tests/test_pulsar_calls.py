"""A message's send, receive and acknowledgement go to the native Pulsar client directly
(``react_mem.bus.pulsar_calls``): the installed client is used that way, both ways (direct,
and ``pulsar.asyncio``'s own calls where the native object is missing) carry what was sent
in its order, and a completion the client makes on the loop's own thread is taken in place,
not scheduled through the loop's wake-up pipe.

The first two over the real embedded broker; the last against a stand-in for the native
consumer that calls back where a test says.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import _pulsar
import pytest

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarConsumer, PulsarOptions, PulsarProducer, PulsarTransport
from react_mem.bus.pulsar_calls import Native
from react_mem.bus.queues import Queue
from react_mem.errors import BusError


@pytest.fixture
async def pulsar_bus(broker: EmbeddedBroker) -> Any:
    bus = PulsarTransport(PulsarOptions(url=broker.url, connect_timeout=10))
    await bus.connect()
    yield bus
    await bus.close()


async def endpoints(bus: PulsarTransport, cls: str) -> tuple[PulsarProducer, PulsarConsumer]:
    queue = Queue.parse(f"{cls}:tg:calls-{uuid.uuid4().hex[:10]}")
    consumer = await bus.consumer(queue, "calls")
    return await bus.producer(queue), consumer


@pytest.mark.broker
async def test_the_installed_client_is_called_directly(pulsar_bus: PulsarTransport) -> None:
    producer, consumer = await endpoints(pulsar_bus, "response")
    assert producer._native.direct and consumer._native.direct


@pytest.mark.broker
@pytest.mark.parametrize("cls", ["response", "flow"])
@pytest.mark.parametrize("sender", ["direct", "wrapper"])
@pytest.mark.parametrize("receiver", ["direct", "wrapper"])
async def test_queued_messages_arrive_whole_and_in_order_either_way(
    pulsar_bus: PulsarTransport, cls: str, sender: str, receiver: str
) -> None:
    producer, consumer = await endpoints(pulsar_bus, cls)
    if sender == "wrapper":
        producer._native._native = None
    if receiver == "wrapper":
        consumer._native._native = None
    receipts = [producer.queue(f"body {n}".encode(), {"n": str(n)}) for n in range(40)]
    await asyncio.gather(*receipts)
    got = []
    for _ in range(40):
        delivery = await asyncio.wait_for(consumer.receive(), 30)
        got.append((delivery.data, delivery.properties))
        await consumer.ack(delivery)
    assert got == [(f"body {n}".encode(), {"n": str(n)}) for n in range(40)]


@pytest.mark.broker
async def test_a_closed_producer_fails_its_receipt_with_a_bus_error(
    pulsar_bus: PulsarTransport,
) -> None:
    producer, _ = await endpoints(pulsar_bus, "response")
    await producer.close()
    with pytest.raises(BusError, match=r"send to .* failed"):
        await producer.queue(b"late", {})


class Message:
    def data(self) -> bytes:
        return b"queued"


class NativeConsumer:
    """Stands in for ``_pulsar.Consumer``: completes a receive at once, on the caller's
    thread (a message already queued), or from a thread of its own (one that arrives)."""

    def __init__(self, *, in_place: bool) -> None:
        self.in_place = in_place

    def receive_async(self, callback: Any) -> None:
        if self.in_place:
            callback(_pulsar.Result.Ok, Message())
        else:
            threading.Thread(target=callback, args=(_pulsar.Result.Ok, Message())).start()

    def acknowledge_async(self, message: Any, callback: Any) -> None:
        callback(_pulsar.Result.Ok)


class Wrapper:
    def __init__(self, native: NativeConsumer) -> None:
        self._consumer = native


@pytest.mark.parametrize("in_place", [True, False])
async def test_a_completion_on_the_loop_thread_is_taken_in_place(in_place: bool) -> None:
    loop = asyncio.get_running_loop()
    scheduled = 0
    schedule = loop.call_soon_threadsafe

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal scheduled
        scheduled += 1
        return schedule(*args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        native = Native(Wrapper(NativeConsumer(in_place=in_place)), "_consumer", "t")
        message = await asyncio.wait_for(native.receive(), 10)
        await native.ack(message)
    finally:
        del loop.call_soon_threadsafe
    assert message.data() == b"queued"
    # In place: neither the receive nor the ack woke the loop from outside; from the
    # client's thread the receive did, once.
    assert scheduled == (0 if in_place else 1)
