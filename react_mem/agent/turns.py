"""Conversation turns on their way to conversation memory, so a follow-up sees the last one.

A final answer's turn is appended beside the trajectory's publish, and what the answer
waits for of it is the agent's ``turn_wait`` setting:

- ``sent`` (default): its request on the bus. Conversation memory serves one
  conversation's operations in their order of arrival (``memory_services/conversations/
  order.py``), so the read of any follow-up, sent after the answer, comes after the append
  and sees the turn. The reply is awaited after the answer; a failed append is sent again
  (same turn id: stored once), and a turn that cannot be stored is logged and counted. The
  answer still waits for the stored turn when what the append's reply says goes into it:
  the conversation's quota notices, or its cap (``MemoryState.hold_turn``, from recall).
- ``reply``: the turn stored, for deployments whose conversation-memory replicas share a
  subscription (each orders only what it receives itself).

An error reply's turn is appended after the reply. While an append runs it is registered
here under its conversation, and a recall on this replica waits for it first: until its
request is on the bus (``sent``; again while a failed one is sent anew) or until it is
stored (``reply``), at most the recall's own timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from react_mem.schema.scope import Scope

#: An append, given the event it sets while its request is on the bus.
Append = Callable[[asyncio.Event], Coroutine[Any, Any, str | None]]


@dataclass
class Pending:
    task: asyncio.Task[str | None]
    #: Set while its request is on the bus ahead of anything sent later (cleared while a
    #: failed attempt waits to be sent again).
    sent: asyncio.Event = field(default_factory=asyncio.Event)

    async def ordered(self) -> None:
        """Until its request is on the bus, or it has ended (stored, or failed for good)."""
        if self.task.done() or self.sent.is_set():
            return
        waiting = asyncio.ensure_future(self.sent.wait())
        try:
            await asyncio.wait({waiting, self.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()


class PendingTurns:
    def __init__(self) -> None:
        #: The latest append of each conversation (an earlier one was sent before it).
        self._pending: dict[Scope, Pending] = {}
        #: Every append under way, for ``drain``.
        self._running: set[asyncio.Task[str | None]] = set()

    def start(self, scope: Scope, append: Append) -> Pending:
        """Run ``append`` (which never raises) for ``scope``'s conversation."""
        sent = asyncio.Event()
        pending = Pending(asyncio.create_task(append(sent)), sent)
        self._pending[scope] = pending
        self._running.add(pending.task)

        def done(task: asyncio.Task[str | None]) -> None:
            self._running.discard(task)
            if self._pending.get(scope) is pending:
                del self._pending[scope]

        pending.task.add_done_callback(done)
        return pending

    async def settled(self, scope: Scope, timeout: float, *, stored: bool = True) -> None:
        """Wait (at most ``timeout`` seconds) for the append under way in ``scope``'s
        conversation, if there is one: until it is stored (``stored``), else until its
        request is on the bus."""
        pending = self._pending.get(scope)
        if pending is None or pending.task.done():
            return
        wait = pending.task if stored else asyncio.ensure_future(pending.ordered())
        done, _ = await asyncio.wait({wait}, timeout=timeout)  # neither raises nor cancels it
        if not stored and not done:
            wait.cancel()

    async def drain(self, timeout: float) -> int:
        """Wait (at most ``timeout`` seconds) for every append under way; how many are
        still under way after it."""
        if not self._running:
            return 0
        _, left = await asyncio.wait(set(self._running), timeout=timeout)
        return len(left)

    @property
    def pending(self) -> int:
        return len(self._pending)
