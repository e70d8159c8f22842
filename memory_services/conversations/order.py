"""Each conversation's operations in the order they arrive, in this process.

A handler takes its place in its conversation's line as it starts, before its first
suspension (the PII screen and the turn's embedding run in threads), and keeps it until
its operation is done. The consumer starts handlers in the order the broker delivers their
messages, so a ``get`` that arrives after an ``append`` reads the turn that append
stores, however long its screen takes: the agent may send an answer once its turn's append
is on the bus, before the turn is stored (docs/agent.md, "The turn and the answer").
This holds for one process serving a conversation (the embedded store, one replica, or
partitioned replicas, where an owner's every request reaches one); replicas that share a
subscription over a Qdrant server each keep their own arrivals' order, not each other's.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memory_services.store.base import Scope


class ArrivalOrder:
    def __init__(self) -> None:
        self._lines: weakref.WeakValueDictionary[Scope, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @asynccontextmanager
    async def turn(self, scope: Scope) -> AsyncIterator[None]:
        """Hold ``scope``'s conversation for one operation, after every operation on it
        that entered before. Enter it before anything else the handler awaits:
        ``asyncio.Lock`` queues its waiters first come, first served, and a waiter takes its
        place in the queue when it calls ``acquire``."""
        line = self._lines.get(scope)
        if line is None:
            line = self._lines[scope] = asyncio.Lock()
        async with line:
            yield
