"""The transport seam: bytes in, bytes out, explicit settlement.

A Pulsar implementation serves production and the embedded broker; an in-memory one
serves unit tests. A RabbitMQ/Kafka backend would implement the same three protocols.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from react_mem.bus.queues import Queue


@dataclass(slots=True)
class Delivery:
    """One received message. ``redelivery_count`` is 0 on first delivery."""

    data: bytes
    properties: dict[str, str]
    redelivery_count: int = 0
    handle: object = field(default=None, repr=False)


class Producer(Protocol):
    async def send(self, data: bytes, properties: dict[str, str]) -> None: ...

    async def close(self) -> None: ...


class Consumer(Protocol):
    async def receive(self) -> Delivery: ...

    async def ack(self, delivery: Delivery) -> None: ...

    async def nack(self, delivery: Delivery) -> None:
        """Hand the message back; it is delivered again, with ``redelivery_count`` + 1."""

    async def close(self) -> None: ...


class Transport(Protocol):
    async def connect(self) -> None: ...

    async def producer(self, queue: Queue) -> Producer: ...

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        """Subscribe: Shared for flow/request queues, Exclusive for response/notify."""

    async def close(self) -> None: ...
