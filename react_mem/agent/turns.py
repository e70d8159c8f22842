"""Conversation turns on their way to conversation memory, so a follow-up sees the last one.

The turn is appended beside the answer, not before it (the append, PII screening included,
would add its round trip to every answer): it starts just before the answer goes out and is
registered here under its conversation. A client can only ask its follow-up after the
answer, so the follow-up finds the append registered, and its recall waits for it (at most
the recall's own timeout) before reading the conversation. This holds for the follow-ups a
replica serves itself (the embedded default: one agent process); across replicas a
follow-up on another one reads whatever conversation memory holds by then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from react_mem.schema.scope import Scope


class PendingTurns:
    def __init__(self) -> None:
        self._pending: dict[Scope, asyncio.Task[None]] = {}

    def start(self, scope: Scope, append: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``append`` (which never raises) for ``scope``'s conversation."""
        task = asyncio.create_task(append)
        self._pending[scope] = task

        def done(_: asyncio.Task[None]) -> None:
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
