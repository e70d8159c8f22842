"""Work a flow does after its reply (provenance for TrustGraph's explainability), never on
the reply's path: bounded in number and in time, finished or dropped when its flow stops.

Nothing here is worth an answer: a full queue, a piece of work past its deadline, one that
fails, and one still running when the flow stops are dropped and counted
(``react_mem_background_dropped_total{work, reason}``). The first drop of each kind of work
and reason is a warning; the rest are counted quietly, so a librarian that is down does not
write a line per answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from react_mem.metrics import BackgroundMetrics

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BackgroundLimits:
    #: Pieces of work pending or running at once; more are dropped at once.
    pending: int = 256
    #: Seconds one piece may take (a librarian save, a triples send).
    deadline: float = 15.0
    #: Seconds a stopping flow waits for its pending work before dropping the rest.
    grace: float = 2.0


class Background:
    """A flow's pending after-reply work."""

    def __init__(
        self, where: str, metrics: BackgroundMetrics, limits: BackgroundLimits | None = None
    ) -> None:
        self._where, self._metrics = where, metrics
        self._limits = limits or BackgroundLimits()
        self._tasks: set[asyncio.Task[None]] = set()
        self._warned: set[tuple[str, str]] = set()
        self._closed = False

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def submit(self, work: str, run: Callable[[], Awaitable[None]]) -> bool:
        """Start ``run`` (a piece of the kind ``work``) unless the flow is stopping or its
        queue is full; whether it started."""
        if self._closed:
            self.dropped(work, "stopped")
            return False
        if len(self._tasks) >= self._limits.pending:
            self.dropped(work, "full")
            return False
        task = asyncio.create_task(self._run(work, run), name=f"{self._where}:{work}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, work: str, run: Callable[[], Awaitable[None]]) -> None:
        try:
            async with asyncio.timeout(self._limits.deadline):
                await run()
        except TimeoutError:
            self.dropped(work, "deadline")
        except asyncio.CancelledError:
            self.dropped(work, "stopped")
            raise
        except Exception as exc:  # noqa: BLE001 - after-reply work never fails its flow
            self.dropped(work, "failed", exc)

    def dropped(self, work: str, reason: str, exc: BaseException | None = None) -> None:
        """Count (and say, the first time) one piece of ``work`` dropped for ``reason``."""
        self._metrics.dropped(work, reason)
        if (work, reason) in self._warned:
            logger.debug("%s: %s dropped (%s): %r", self._where, work, reason, exc)
            return
        self._warned.add((work, reason))
        detail = f": {exc!r}" if exc is not None else ""
        # A stopping flow dropping what it had left is expected: said, not warned.
        level = logging.INFO if reason == "stopped" else logging.WARNING
        logger.log(
            level,
            "%s: %s dropped (%s)%s; further drops of it are counted in "
            "react_mem_background_dropped_total",
            self._where,
            work,
            reason,
            detail,
        )

    async def close(self) -> None:
        """Take no more work; let pending work finish within the grace period, then cancel
        (and count) the rest."""
        self._closed = True
        if not self._tasks:
            return
        _, unfinished = await asyncio.wait(set(self._tasks), timeout=self._limits.grace)
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.wait(unfinished)
