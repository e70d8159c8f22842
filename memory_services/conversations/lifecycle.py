"""Ending conversations and publishing :class:`ConversationEnded` once per end.

The end state is an outbox on the header: ``end`` first persists ``ended`` (with
``published: false``), then sends the event, then records ``published: true``. So

- a redelivered or repeated ``end`` finds ``ended`` and sends nothing new;
- a crash (or a failed send) after persisting ``ended`` leaves ``published: false``, and
  the next ``end``, ``append`` or background sweep sends the event then;
- only a crash between a successful send and recording it repeats the event, with the
  same ``event_id``: delivery is at least once, never silently lost, and the consumer
  (the learner) must be idempotent on ``event_id``. Exactly-once would need a transaction
  spanning the store and the broker, which neither Pulsar nor Qdrant offers.

Ended conversations are kept (turns, summary and header) for the workspace's retention
(:mod:`react_mem.retention`, ``conversation-retention-days``) after their end has been
announced, then the sweep deletes them; a conversation reopened by a new turn is not ended.

Writes to one conversation are serialised by a per-conversation lock, in this process; a
deployment runs one replica per store (the embedded store is per process anyway).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memory_services.conversations.conversation_memory import ConversationMemory, Payload
from memory_services.conversations.records import event_id, header_scope
from memory_services.store.base import AllOwners, Condition, Scope
from react_mem.retention import WorkspaceRetention
from react_mem.schema.conversations import ConversationEnded, EndReason

#: Sends an event for a conversation whose header is given; False when it cannot be sent
#: now (no running flow of that workspace), so it stays pending.
Publisher = Callable[[Mapping[str, Any], ConversationEnded], Awaitable[bool]]

#: Below the bus's 5 MiB message limit, with room for properties.
MAX_EVENT_BYTES = 4 * 1024 * 1024


class ConversationLifecycle:
    def __init__(
        self,
        memory: ConversationMemory,
        *,
        publish: Publisher,
        idle_timeout: float | None,
        clock: Callable[[], float],
        max_event_bytes: int = MAX_EVENT_BYTES,
        retention: WorkspaceRetention | None = None,
    ) -> None:
        self._memory = memory
        self._publish = publish
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._max_event_bytes = max_event_bytes
        self._retention = retention
        #: Conversations deleted by the sweeps past their retention, since start.
        self.expired = 0
        self._locks: weakref.WeakValueDictionary[Scope, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def lock(self, scope: Scope) -> asyncio.Lock:
        """The lock serialising writes to the conversation ``scope``."""
        lock = self._locks.get(scope)
        if lock is None:
            lock = self._locks[scope] = asyncio.Lock()
        return lock

    async def end(
        self, scope: Scope, reason: EndReason, publish: Publisher | None = None
    ) -> Payload | None:
        """End the conversation (once) and publish its event; None if it does not exist.

        An ``idle`` end re-checks idleness under the lock, so a turn that has just arrived
        keeps the conversation open.
        """
        async with self.lock(scope):
            header = await self._memory.header(scope)
            if header is None:
                return None
            if not header["ended"]:
                now = self._clock()
                if reason == "idle" and not self._is_idle(header, now):
                    return header
                header |= {"ended": True, "ended_at": now, "end_reason": reason}
                header["published"] = False
                await self._memory.write_header(scope, header)
            return await self.flush(scope, header, publish)

    async def flush(
        self, scope: Scope, header: Payload, publish: Publisher | None = None
    ) -> Payload:
        """Send the pending event of an ended conversation (call holding its lock)."""
        if not header["ended"] or header["published"]:
            return header
        event = self._fit(await self._event(scope, header))
        if not await (publish or self._publish)(header, event):
            return header
        header = header | {"published": True}
        await self._memory.write_header(scope, header)
        return header

    async def sweep(self) -> tuple[int, int, int]:
        """End idle conversations and send pending events in every known scope; return
        (conversations, turns, ended now)."""
        conversations = turns = ended = 0
        now = self._clock()
        for scope in await self._memory.registry.scopes():
            if self.idle_timeout is not None:
                idle = [
                    Condition("ended", equals=False),
                    Condition("last_activity", lt=now - self.idle_timeout),
                ]
                for header in await self._memory.all_headers(scope, idle):
                    done = await self.end(header_scope(header), "idle")
                    ended += bool(done and done["end_reason"] == "idle" and done["published"])
            pending = [Condition("ended", equals=True), Condition("published", equals=False)]
            for header in await self._memory.all_headers(scope, pending):
                conversation = header_scope(header)
                async with self.lock(conversation):
                    current = await self._memory.header(conversation)
                    if current is not None:
                        await self.flush(conversation, current)
            if self._retention is not None:
                self.expired += await self._expire(
                    scope, self._retention.cutoff(scope.workspace, now)
                )
            conversations += await self._memory.count(scope, _kind("header"))
            turns += await self._memory.count(scope, _kind("turn"))
        return conversations, turns, ended

    async def _expire(self, scope: AllOwners, cutoff: float) -> int:
        """Delete the conversations in ``scope`` that ended (and were announced) before
        ``cutoff``; return how many."""
        if math.isinf(cutoff):
            return 0
        expired = [
            Condition("ended", equals=True),
            Condition("published", equals=True),
            Condition("ended_at", lt=cutoff),
        ]
        removed = 0
        for header in await self._memory.all_headers(scope, expired):
            conversation = header_scope(header)
            async with self.lock(conversation):
                current = await self._memory.header(conversation)  # not reopened meanwhile
                if _expired(current, cutoff):
                    await self._memory.delete(conversation)
                    removed += 1
        return removed

    def _is_idle(self, header: Mapping[str, Any], now: float) -> bool:
        timeout = self.idle_timeout
        return timeout is not None and float(header["last_activity"]) < now - timeout

    async def _event(self, scope: Scope, header: Mapping[str, Any]) -> ConversationEnded:
        turns = await self._memory.turns(scope)
        return ConversationEnded(
            workspace=scope.workspace,
            collection=scope.collection,
            user=scope.user,
            conversation_id=scope.conversation or "",
            turns=turns,
            summary=header["summary"],
            reason=header["end_reason"],
            ended_at=float(header["ended_at"]),
            event_id=event_id(scope, int(header["generation"])),
            turn_count=len(turns),
        )

    def _fit(self, event: ConversationEnded) -> ConversationEnded:
        """Leave out the oldest turns while the event is too large for the bus."""
        size = len(event.encode())
        if size <= self._max_event_bytes:
            return event
        sizes = [len(t.encode()) + 2 for t in event.turns]  # + the ", " between items
        cut = 0
        while cut < len(sizes) and size > self._max_event_bytes:
            size -= sizes[cut]
            cut += 1
        return event.model_copy(update={"turns": event.turns[cut:], "omitted_turns": cut})


def _expired(header: Mapping[str, Any] | None, cutoff: float) -> bool:
    if header is None or not header["ended"] or not header["published"]:
        return False
    return float(header["ended_at"]) < cutoff


def _kind(kind: str) -> Condition:
    return Condition("kind", equals=kind)
