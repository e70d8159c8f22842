"""The transport seam: bytes in, bytes out, explicit settlement.

Pulsar (``pulsar.py``) serves production and the embedded broker; the in-memory transport
(``in_process.py``) serves tests. Another broker implements these three protocols and registers
in ``backends.py``; ``tests/test_transport_contract.py`` holds every one to the same rules.
"""

from __future__ import annotations

import asyncio
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


Receipt = asyncio.Future[None]


class QueuingProducer(Producer, Protocol):
    """A producer that can take a message without waiting for the broker's receipt of the
    ones before it: what it was given is sent in that order."""

    async def send_queued(self, data: bytes, properties: dict[str, str]) -> Receipt:
        """Queue ``data`` behind every message given to this producer before, and return at
        once: the result is the broker's receipt (raising what :meth:`send` would)."""


async def send_queued(producer: Producer, data: bytes, properties: dict[str, str]) -> Receipt:
    """``data`` on ``producer``, in order behind what it was given before; the result is its
    receipt, to await later. A producer that cannot queue (``send_queued``) sends it here,
    receipt and all: its result is then done already."""
    queue = getattr(producer, "send_queued", None)
    if queue is not None:
        receipt: Receipt = await queue(data, properties)
        return receipt
    await producer.send(data, properties)
    return received()


def received() -> Receipt:
    """A receipt that is in already."""
    done: Receipt = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


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
