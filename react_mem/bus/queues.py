"""Queue identifiers ``class:topicspace:topic``, as TrustGraph has them, and what each class
asks of a broker: persistence and shared or exclusive subscriptions.

Broker-neutral: each transport maps a :class:`Queue` onto its own names (Pulsar topics in
``pulsar.py``); nothing here knows a broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from react_mem.errors import ConfigurationError


class QueueClass(StrEnum):
    FLOW = "flow"  # persistent work queue, competing consumers
    REQUEST = "request"  # non-persistent RPC requests, competing consumers
    RESPONSE = "response"  # non-persistent RPC responses, one subscriber each
    NOTIFY = "notify"  # non-persistent broadcast, one subscriber each


@dataclass(frozen=True, slots=True)
class Queue:
    cls: QueueClass
    topicspace: str
    topic: str

    @classmethod
    def parse(cls, queue_id: str) -> Queue:
        parts = queue_id.split(":", 2)
        if len(parts) != 3 or not all(parts):
            raise ConfigurationError(
                f"invalid queue id {queue_id!r}: expected class:topicspace:topic"
            )
        try:
            queue_class = QueueClass(parts[0])
        except ValueError:
            raise ConfigurationError(
                f"invalid queue class {parts[0]!r} in {queue_id!r}: "
                f"expected one of {', '.join(c.value for c in QueueClass)}"
            ) from None
        return cls(queue_class, parts[1], parts[2])

    @property
    def id(self) -> str:
        return f"{self.cls}:{self.topicspace}:{self.topic}"

    @property
    def persistent(self) -> bool:
        """Flow queues keep messages until acknowledged and redeliver what is nacked; the
        others deliver only to current subscribers, at most once."""
        return self.cls is QueueClass.FLOW

    @property
    def exclusive(self) -> bool:
        """Response and notify queues get one subscription per subscriber (exclusive);
        flow and request queues are shared: a subscription's consumers compete."""
        return self.cls in (QueueClass.RESPONSE, QueueClass.NOTIFY)


def queue_id(topic: str, cls: QueueClass = QueueClass.FLOW, topicspace: str = "tg") -> str:
    """Build a queue id, as TrustGraph's ``queue()`` does."""
    return f"{cls}:{topicspace}:{topic}"


def dead_letter_queue(queue: Queue, subscription: str) -> Queue:
    """Where a subscription's dead letters go: persistent, so they outlive every process."""
    return Queue(QueueClass.FLOW, queue.topicspace, f"dlq--{queue.cls}--{subscription}")
