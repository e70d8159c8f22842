"""An in-process transport for tests: processors and clients on one ``InProcessTransport``
talk as they would over a broker, with no broker (as FastStream's test brokers).

It keeps the transport contract (``tests/test_transport_contract.py``): shared
subscriptions compete for messages, exclusive ones refuse a second consumer; persistent
queues keep their messages (``from_earliest`` replays them) and redeliver nacked and
unacknowledged ones with a higher ``redelivery_count``; the others deliver only to current
subscribers. One process only; use a real broker to test across processes.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Delivery
from react_mem.errors import BusError, ConsumerClosed

_ids = itertools.count()


@dataclass
class _Subscription:
    exclusive: bool
    queue: asyncio.Queue[Delivery] = field(default_factory=asyncio.Queue)
    consumers: int = 0


@dataclass
class _Topic:
    persistent: bool
    log: list[tuple[bytes, dict[str, str]]] = field(default_factory=list)
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)


class InProcessProducer:
    def __init__(self, bus: InProcessTransport, topic: _Topic) -> None:
        self._bus, self._topic = bus, topic
        self.closed = False

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        if self.closed or self._bus.closed:
            raise BusError("producer is closed")
        if self._topic.persistent:
            self._topic.log.append((data, dict(properties)))
        for sub in self._topic.subscriptions.values():
            sub.queue.put_nowait(Delivery(data, dict(properties), 0, next(_ids)))

    async def close(self) -> None:
        self.closed = True


class InProcessConsumer:
    def __init__(self, bus: InProcessTransport, topic: _Topic, sub: _Subscription) -> None:
        self._bus, self._topic, self._sub = bus, topic, sub
        self._unacked: dict[object, Delivery] = {}
        self.acked: list[Delivery] = []
        self.closed = False

    async def receive(self) -> Delivery:
        if self.closed or self._bus.closed:
            raise ConsumerClosed("consumer is closed")
        delivery = await self._sub.queue.get()
        if self._topic.persistent:
            self._unacked[delivery.handle] = delivery
        return delivery

    async def ack(self, delivery: Delivery) -> None:
        self._unacked.pop(delivery.handle, None)
        self.acked.append(delivery)

    async def nack(self, delivery: Delivery) -> None:
        if self._unacked.pop(delivery.handle, None) is None:
            return  # non-persistent: gone, as on Pulsar
        again = Delivery(
            delivery.data, delivery.properties, delivery.redelivery_count + 1, delivery.handle
        )
        asyncio.get_running_loop().call_later(
            self._bus.nack_delay, self._sub.queue.put_nowait, again
        )

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._sub.consumers -= 1
        for delivery in self._unacked.values():
            self._sub.queue.put_nowait(
                Delivery(
                    delivery.data,
                    delivery.properties,
                    delivery.redelivery_count + 1,
                    delivery.handle,
                )
            )
        self._unacked.clear()


class InProcessTransport:
    """``nack_delay``: seconds before a nacked message comes back."""

    def __init__(self, *, nack_delay: float = 0.01) -> None:
        self.nack_delay = nack_delay
        self.topics: dict[str, _Topic] = {}
        self.closed = False

    def topic(self, queue: Queue) -> _Topic:
        return self.topics.setdefault(queue.id, _Topic(queue.persistent))

    async def connect(self) -> None:
        self.closed = False

    async def producer(self, queue: Queue) -> InProcessProducer:
        return InProcessProducer(self, self.topic(queue))

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> InProcessConsumer:
        topic = self.topic(queue)
        sub = topic.subscriptions.get(subscription)
        if sub is None:
            sub = topic.subscriptions[subscription] = _Subscription(queue.exclusive)
            if from_earliest:
                for data, props in topic.log:
                    sub.queue.put_nowait(Delivery(data, dict(props), 0, next(_ids)))
        elif sub.exclusive and sub.consumers:
            raise BusError(f"exclusive subscription {subscription} already has a consumer")
        sub.consumers += 1
        return InProcessConsumer(self, topic, sub)

    async def close(self) -> None:
        self.closed = True
