"""The points of each edge collection that the engine's count of indexed points hides.

A point given a new payload is moved out of its indexed segment into the one searches scan,
and a deleted point stays in that segment: since a collection's last index run, the engine's
``indexed_vectors_count`` is off for both (see :func:`.edge_query.unindexed`). The store
counts them here: the ids given payloads (distinct, so a fact
retrieved again and again counts once), and a number for the rest (deletions, and points
counted before the store was last opened). The count is kept in a file beside the live
shard generation (a number only), so it outlasts a restart; a new generation starts without.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from pathlib import Path

from memory_services.store import edge_build

logger = logging.getLogger(__name__)

#: (ids given payloads, other points changed) taken at an index run's start.
Taken = tuple[set[str], int]


class ChangedPoints:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._moved: dict[str, set[str]] = {}
        self._other: dict[str, int] = {}
        #: The count last read or written per collection (unchanged: not written again).
        self._saved: dict[str, int] = {}

    def count(self, name: str) -> int:
        return len(self._moved.get(name, ())) + self._other.get(name, 0)

    def payloads(self, name: str, ids: Iterable[str], *, cap: int) -> None:
        """``ids`` were given new payloads; past ``cap`` distinct ones (enough to decide on an
        index run) the set stops growing."""
        moved = self._moved.setdefault(name, set())
        if len(moved) < cap:
            moved.update(ids)

    def deleted(self, name: str, count: int) -> None:
        self._other[name] = self._other.get(name, 0) + count

    def take(self, name: str) -> Taken:
        """Start counting afresh (an index run begins: its shard has no saved count yet);
        returns what was counted."""
        self._saved.pop(name, None)
        return self._moved.pop(name, set()), self._other.pop(name, 0)

    def give_back(self, name: str, taken: Taken) -> None:
        """The index run failed: what it took still holds."""
        self._moved.setdefault(name, set()).update(taken[0])
        self.deleted(name, taken[1])

    async def load(self, name: str) -> int:
        """Read the live shard's saved count (0 if none); returns it."""
        saved = await asyncio.to_thread(_read, self.root, name)
        self._moved.pop(name, None)
        self._other[name] = self._saved[name] = saved
        return saved

    async def save(self, name: str) -> None:
        """Write the live shard's count (nothing while it is 0 or as last saved)."""
        count = self.count(name)
        if count and count != self._saved.get(name):
            try:
                await asyncio.to_thread(_write, self.root, name, count)
            except OSError as exc:  # lost, it only delays an index run
                logger.warning("cannot save %s's count of changed points: %s", name, exc)
                return
            self._saved[name] = count


def _path(root: Path, name: str) -> Path:
    live = edge_build.live_path(root, name)
    return live.with_name(f"{live.name}{edge_build.CHANGED}")


def _read(root: Path, name: str) -> int:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return max(0, int(_path(root, name).read_text()))
    return 0


def _write(root: Path, name: str, count: int) -> None:
    path = _path(root, name)
    scratch = path.with_name(f"{path.name}.tmp")
    scratch.write_text(str(count))
    scratch.replace(path)
