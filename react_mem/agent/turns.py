"""Conversation turns on their way to conversation memory, so a follow-up sees the last one.

A final answer's turn is appended before the answer goes out, beside the trajectory's
publish (the answer waits for both: the agent's ``finish``), so any replica's follow-up
finds it. An error reply's turn is appended after the reply; while an append runs it is
registered here under its conversation, and a recall on this replica waits for the one
under way in its conversation (at most the recall's own timeout) before reading it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from react_mem.schema.scope import Scope


class PendingTurns:
    def __init__(self) -> None:
        self._pending: dict[Scope, asyncio.Task[str | None]] = {}

    def start(
        self, scope: Scope, append: Coroutine[Any, Any, str | None]
    ) -> asyncio.Task[str | None]:
        """Run ``append`` (which never raises) for ``scope``'s conversation."""
        task = asyncio.create_task(append)
        self._pending[scope] = task

        def done(_: asyncio.Task[str | None]) -> None:
            if self._pending.get(scope) is task:
                del self._pending[scope]

        task.add_done_callback(done)
        return task

    async def settled(self, scope: Scope, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the append under way in ``scope``'s
        conversation, if there is one."""
        task = self._pending.get(scope)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=timeout)  # neither raises nor cancels it

    @property
    def pending(self) -> int:
        return len(self._pending)
