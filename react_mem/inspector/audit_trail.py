"""The audit log the inspector shows: the flow's ``memory-audit`` queue, read as it arrives.

The inspector holds a durable subscription of its own to each flow's audit queue it has been
asked about, so events sent while it was down arrive when it comes back, and keeps the most
recent ones in memory. Audit events hold scopes, ids and counts, never memory contents.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Transport
from react_mem.inspector.backend import NAME, Memory, Where
from react_mem.schema.audit import AuditEvent

logger = logging.getLogger(__name__)


class AuditTrail:
    """The last ``keep`` audit events of every flow watched, newest first."""

    def __init__(self, memory: Memory, *, keep: int = 2000) -> None:
        self._memory = memory
        self._events: deque[AuditEvent] = deque(maxlen=keep)
        self._seen: deque[str] = deque(maxlen=keep)
        self._watching: dict[Where, tuple[Consumer, asyncio.Task[None]]] = {}
        self._lock = asyncio.Lock()

    async def watch(self, where: Where) -> None:
        """Subscribe to ``where``'s audit queue (once)."""
        async with self._lock:
            if where in self._watching:
                return
            transport: Transport = self._memory.transport
            queue = Queue.parse(self._memory.audit_queue(where))
            consumer = await transport.consumer(queue, NAME, from_earliest=True)
            task = asyncio.create_task(self._read(consumer), name=f"audit {where}")
            self._watching[where] = (consumer, task)

    async def _read(self, consumer: Consumer) -> None:
        while True:
            delivery = await consumer.receive()
            try:
                event = AuditEvent.decode(delivery.data)
            except ValueError:  # not an audit event: nothing to show, never redelivered
                logger.warning("audit: an undecodable event was skipped")
            else:
                self.add(event)
            await consumer.ack(delivery)

    def add(self, event: AuditEvent) -> None:
        if event.event_id and event.event_id in self._seen:
            return  # at-least-once delivery: a repeat is the same event
        self._seen.append(event.event_id)
        self._events.appendleft(event)

    def events(
        self, where: Where, *, user: str | None = None, limit: int = 200
    ) -> list[AuditEvent]:
        found = [
            e
            for e in self._events
            if e.workspace == where.workspace
            and e.flow == where.flow
            and (user is None or e.user == user)
        ]
        return found[:limit]

    def users(self) -> list[str]:
        """Users the log names, for the user picker."""
        return sorted({e.user for e in self._events if e.user})

    async def close(self) -> None:
        for consumer, task in self._watching.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            await consumer.close()
        self._watching.clear()
