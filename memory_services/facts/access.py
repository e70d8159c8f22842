"""Retrieval's access statistics, written behind the reply.

Every fact a retrieval returns gets ``last_accessed`` = now and ``access_count`` + 1. The
response carries the new values at once; the store gets them later, coalesced: a timer
writes what is pending ``delay`` seconds after the first retrieval that left something
pending, and :meth:`AccessLog.flush` writes it at once (the service calls it before every
other operation, so whatever reads or rewrites facts sees the counts, and on stop). A write
sets absolute values, so writing them twice changes nothing; a write that fails keeps them
pending for the next flush. Only a crash loses what is pending (at most ``delay`` seconds of
access statistics). Writing behind keeps one store write per returned fact (≈0.3 ms each)
off the reply and lets repeated retrievals of a fact share one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_services.facts.context import FactContext
from memory_services.retry import retrying
from memory_services.store.base import Scope

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Access:
    scope: Scope
    last_accessed: float
    access_count: int


class AccessLog:
    def __init__(self, ctx: FactContext, *, delay: float = 1.0) -> None:
        self._ctx = ctx
        self.delay = delay
        #: Fact id → what its record should say, not yet written.
        self._pending: dict[str, Access] = {}
        #: Taken by a flush that is writing them now.
        self._writing: dict[str, Access] = {}
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        """Facts whose statistics are not yet written."""
        return len(self._pending.keys() | self._writing.keys())

    def seen(self, scope: Scope, id: str, stored: Mapping[str, Any], now: float) -> dict[str, Any]:
        """Record a retrieval of fact ``id`` (``stored``: its payload as the search found
        it); return the payload fields the retrieval sets."""
        count = int(stored["access_count"])
        for held in (self._pending.get(id), self._writing.get(id)):
            if held is not None and held.scope == scope:  # the store is behind these
                count = max(count, held.access_count)
        access = Access(scope, now, count + 1)
        self._pending[id] = access
        if self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())
        return {"last_accessed": access.last_accessed, "access_count": access.access_count}

    async def flush(self) -> None:
        """Write everything pending now."""
        async with self._lock:
            if not self._pending:
                return
            self._writing, self._pending = self._pending, {}
            try:
                await self._write(self._writing)
            except BaseException:
                for id, access in self._writing.items():  # newer retrievals take precedence
                    self._pending.setdefault(id, access)
                raise
            finally:
                self._writing = {}

    async def close(self) -> None:
        """Stop the timer and write what is pending (a clean stop loses nothing)."""
        timer, self._timer = self._timer, None
        if timer is not None and not timer.done():
            timer.cancel()
            try:
                await timer
            except asyncio.CancelledError:
                pass
        await self.flush()

    async def _flush_later(self) -> None:
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            return  # closing: close() flushes
        self._timer = None  # retrievals from now on start the next timer
        try:
            await asyncio.shield(self.flush())  # close() waits for a flush it would cancel
        except asyncio.CancelledError:
            return
        except Exception:
            logger.exception("writing fact access statistics failed; kept for the next flush")
        if self._pending and self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())

    async def _write(self, accesses: Mapping[str, Access]) -> None:
        # Facts given the same values (same time, same count) share one write.
        groups: dict[Access, list[str]] = {}
        for id, access in accesses.items():
            groups.setdefault(access, []).append(id)
        for access, ids in groups.items():
            fields = {"last_accessed": access.last_accessed, "access_count": access.access_count}
            ctx = self._ctx
            await retrying(
                "vector store",
                ctx.store.set_payload,
                ctx.collection,
                ids,
                fields,
                scope=access.scope,
            )
            # A second of retrievals is ~100 writes (20-50 ms on the embedded store, which
            # blocks): let the requests that came meanwhile in between them.
            await asyncio.sleep(0)
