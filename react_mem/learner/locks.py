"""Per-key asyncio locks that disappear when nobody holds or waits for them, and per-key
counts of work under way that a caller can wait out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable


class KeyedLocks:
    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class InFlight:
    """Work under way per key (a user's learning); :meth:`idle` waits until a key has none."""

    def __init__(self) -> None:
        self._running: dict[Hashable, int] = {}
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def running(self, key: Hashable) -> AsyncIterator[None]:
        self._running[key] = self._running.get(key, 0) + 1
        try:
            yield
        finally:
            async with self._changed:
                left = self._running.pop(key) - 1
                if left:
                    self._running[key] = left
                self._changed.notify_all()

    async def idle(self, key: Hashable, timeout: float) -> bool:
        """Whether ``key``'s work ended within ``timeout`` seconds."""
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: key not in self._running), timeout
                )
            except TimeoutError:
                return False
        return True
