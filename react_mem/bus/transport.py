"""The transport seam: bytes in, bytes out, explicit settlement.

Pulsar (``pulsar.py``) serves production and the embedded broker; the in-memory transport
(``in_process.py``) serves tests. Another broker implements these three protocols and registers
in ``backends.py``; ``tests/test_transport_contract.py`` holds every one to the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from react_mem.bus.queues import Queue
from react_mem.errors import BusError


@dataclass(slots=True)
class Delivery:
    """One received message. ``redelivery_count`` is 0 on first delivery."""

    data: bytes
    properties: dict[str, str]
    redelivery_count: int = 0
    handle: object = field(default=None, repr=False)


class BrokerNotRunning(BusError):
    """A client found no broker to join and may not start one (only processors start the
    embedded broker: nothing would be listening on a fresh one)."""


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
        """Subscribe: shared for flow/request queues (a subscription's consumers compete, each
        message goes to one), exclusive for response/notify. Every subscription gets its own
        copy of each message. ``from_earliest``: a new subscription to a persistent queue
        starts at the oldest message still held, instead of at the next one sent."""

    async def close(self) -> None: ...
