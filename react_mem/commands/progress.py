"""A status line while a command waits: elapsed seconds on a terminal, nothing elsewhere;
and, for long operations, a line per step done (a page fetched, a service answered)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TextIO


class StatusLine:
    """``start()`` draws ``label (Ns)`` on ``stream`` every ``interval`` seconds when it
    is a TTY; ``stop()`` erases it. Logs and pipes get no carriage-return noise."""

    def __init__(self, stream: TextIO, label: str, *, interval: float = 0.5) -> None:
        self._stream = stream
        self._label = label
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._drawn = False

    def start(self) -> None:
        if self._task is None and self._stream.isatty():
            self._task = asyncio.create_task(self._draw(time.monotonic()))

    def line(self, text: str) -> None:
        """A lasting line above the status line, on a terminal only."""
        if not self._stream.isatty():
            return
        self._stream.write(("\r\033[K" if self._drawn else "") + text + "\n")
        self._stream.flush()
        self._drawn = False

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._drawn:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._drawn = False

    async def _draw(self, started: float) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self._stream.write(f"\r{self._label} ({time.monotonic() - started:.0f}s)\033[K")
            self._stream.flush()
            self._drawn = True
