"""A burst on a non-persistent queue while its consumer is not receiving (a busy event
loop) all arrives: the broker drops, silently, what a consumer has no permits for, and the
client grants permits only as the application receives (soak finding: LLM replies lost).

Pulsar only (the permits are Pulsar's); real embedded broker.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.queues import Queue

pytestmark = pytest.mark.broker

#: Half again what the client used to prefetch (1000): that many were delivered, the rest
#: dropped.
BURST = 1500


async def test_a_burst_sent_while_the_consumer_is_busy_is_not_lost(
    broker: EmbeddedBroker,
) -> None:
    transport = PulsarTransport(PulsarOptions(url=broker.url, connect_timeout=10))
    await transport.connect()
    try:
        queue = Queue.parse(f"response:tg:burst-{uuid.uuid4().hex[:10]}")
        consumer = await transport.consumer(queue, "busy")
        producer = await transport.producer(queue)
        # Sent concurrently, as replies to many callers are, and every send acknowledged
        # before the consumer receives anything.
        await asyncio.gather(*(producer.send(b"part", {"id": str(n)}) for n in range(BURST)))
        got: set[str] = set()

        async def receive_all() -> None:
            while len(got) < BURST:
                delivery = await consumer.receive()
                got.add(delivery.properties["id"])
                await consumer.ack(delivery)

        # A bound on a hang only: everything was sent before the first receive.
        try:
            await asyncio.wait_for(receive_all(), 60)
        except TimeoutError:
            pytest.fail(f"{BURST - len(got)} of {BURST} messages lost")
        assert got == {str(n) for n in range(BURST)}
    finally:
        await transport.close()
