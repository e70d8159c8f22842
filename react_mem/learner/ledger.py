"""A durable record of what the learner has done, so redelivery writes nothing twice.

One SQLite file per processor id. Each record (workspace + key) holds the plan computed
for it (LLM output included), the steps already written, and whether it is done. The plan
is saved before the first write: a redelivery after a crash reuses it instead of asking
the LLM again, and skips the steps already written.

Beside the records it keeps, for the same retention, the trajectories learned (feedback
on one re-runs its reflection) and the reflections made per window (seed 003's reflection
window: the last few reflections of one scope are context for the next).

With a :class:`~react_mem.learner.cipher.LedgerCipher` the texts (plans, trajectories,
reflections) are kept encrypted; owners and keys stay plain, so forgetting and pruning
find rows without opening them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from react_mem.disk import DiskFloor
from react_mem.errors import DiskFull, NotStarted
from react_mem.learner.cipher import LedgerCipher

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ledger (
    workspace TEXT NOT NULL,
    key TEXT NOT NULL,
    plan TEXT NOT NULL,
    steps TEXT NOT NULL DEFAULT '[]',
    done INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    outcome TEXT,
    PRIMARY KEY (workspace, key)
)""",
    """CREATE TABLE IF NOT EXISTS trajectories (
    workspace TEXT NOT NULL,
    session TEXT NOT NULL,
    body TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (workspace, session)
)""",
    """CREATE TABLE IF NOT EXISTS reflections (
    workspace TEXT NOT NULL,
    key TEXT NOT NULL,
    scope TEXT NOT NULL,
    entry TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (workspace, key)
)""",
    "CREATE INDEX IF NOT EXISTS reflections_window ON reflections (workspace, scope)",
    # A forget's tombstone: the owner as a one-way digest, never the id; ``collection``
    # "" is every collection. Work about the owner from before it is not learned.
    """CREATE TABLE IF NOT EXISTS forgotten (
    workspace TEXT NOT NULL,
    owner TEXT NOT NULL,
    collection TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (workspace, owner, collection)
)""",
)
_TABLES = ("ledger", "trajectories", "reflections", "forgotten")
#: SQLite's primary result code for "database or disk is full".
_SQLITE_FULL = 13


@dataclass
class Entry:
    plan: dict[str, Any]
    steps: list[str] = field(default_factory=list)
    done: bool = False
    #: Once done: ``learned``, or the writes refused for good (``facts: quota-exceeded``).
    outcome: str | None = None


#: Seconds between prunes at most.
PRUNE_EVERY = 3600.0


class TrajectoryLedger:
    """Records older than ``retention`` seconds are pruned at open and then hourly, or 24
    times per retention where that is shorter (a retention of an hour is not held twice as
    long); a workspace in ``overrides()`` keeps its records for its own period (None:
    forever).

    With a ``floor``, the ledger does not open below it (:meth:`DiskFloor.check_start`);
    a write SQLite finds no room for raises :class:`DiskFull`, like the floor's own check,
    so the learner keeps the message and has it redelivered."""

    def __init__(
        self,
        path: Path,
        *,
        retention: float = 7 * 86400.0,
        clock: Callable[[], float] = time.time,
        overrides: Callable[[], Mapping[str, float | None]] = dict,
        cipher: LedgerCipher | None = None,
        floor: DiskFloor | None = None,
    ) -> None:
        self.path = path
        self.floor = floor
        self._cipher = cipher
        self._retention = retention
        self._overrides = overrides
        self._clock = clock
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._pruned_at = 0.0

    async def open(self) -> None:
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        if self.floor is not None:
            self.floor.check_start()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        # No fsync per write: a crash of the process loses nothing (the WAL is in the OS);
        # losing the last writes to a power cut only means re-planning redelivered records,
        # whose writes are idempotent.
        db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            db.execute(statement)
        columns = {row[1] for row in db.execute("PRAGMA table_info(ledger)")}
        if "outcome" not in columns:  # a ledger from before outcomes were kept
            db.execute("ALTER TABLE ledger ADD COLUMN outcome TEXT")
        for column in ("collection", "user"):  # the owner, so a user can be forgotten
            if column not in columns:
                db.execute(f"ALTER TABLE ledger ADD COLUMN {column} TEXT")
        kept = {row[1] for row in db.execute("PRAGMA table_info(trajectories)")}
        for column in ("collection", "user"):  # the owner, readable when bodies are sealed
            if column not in kept:
                db.execute(f"ALTER TABLE trajectories ADD COLUMN {column} TEXT")
        # A deleted row's bytes are overwritten, not left in free pages (forgetting).
        db.execute("PRAGMA secure_delete=ON")
        self._db = db
        self._prune(db)

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.to_thread(db.close)

    async def get(self, workspace: str, key: str) -> Entry | None:
        row = await self._run(
            "SELECT plan, steps, done, outcome FROM ledger WHERE workspace = ? AND key = ?",
            (workspace, key),
            fetch=True,
        )
        if row is None:
            return None
        plan = json.loads(self._open_text(row[0], "ledger", workspace, key))
        return Entry(plan, json.loads(row[1]), bool(row[2]), row[3])

    async def save_plan(
        self,
        workspace: str,
        key: str,
        plan: dict[str, Any],
        *,
        collection: str | None = None,
        user: str | None = None,
    ) -> None:
        """``collection`` and ``user``: the record's owner (see :meth:`forget`)."""
        await self._run(
            "INSERT OR REPLACE INTO ledger "
            "(workspace, key, plan, steps, done, updated_at, collection, user) "
            "VALUES (?, ?, ?, '[]', 0, ?, ?, ?)",
            (
                workspace,
                key,
                self._seal(json.dumps(plan), "ledger", workspace, key),
                self._clock(),
                collection,
                user or None,
            ),
        )

    async def mark_steps(self, workspace: str, key: str, steps: list[str]) -> None:
        await self._run(
            "UPDATE ledger SET steps = ?, updated_at = ? WHERE workspace = ? AND key = ?",
            (json.dumps(steps), self._clock(), workspace, key),
        )

    async def mark_done(self, workspace: str, key: str, outcome: str = "learned") -> None:
        await self._run(
            "UPDATE ledger SET done = 1, outcome = ?, updated_at = ? "
            "WHERE workspace = ? AND key = ?",
            (outcome, self._clock(), workspace, key),
        )

    # -- trajectories, for feedback ----------------------------------------------------------
    async def save_trajectory(
        self,
        workspace: str,
        session: str,
        body: str,
        *,
        collection: str | None = None,
        user: str | None = None,
    ) -> None:
        """``collection`` and ``user``: the trajectory's owner (see :meth:`forget`)."""
        await self._run(
            "INSERT OR REPLACE INTO trajectories "
            "(workspace, session, body, updated_at, collection, user) VALUES (?, ?, ?, ?, ?, ?)",
            (
                workspace,
                session,
                self._seal(body, "trajectories", workspace, session),
                self._clock(),
                collection,
                user or None,
            ),
        )

    async def trajectory(self, workspace: str, session: str) -> str | None:
        row = await self._run(
            "SELECT body FROM trajectories WHERE workspace = ? AND session = ?",
            (workspace, session),
            fetch=True,
        )
        return None if row is None else self._open_text(row[0], "trajectories", workspace, session)

    # -- the reflection window ---------------------------------------------------------------
    async def add_reflection(self, workspace: str, window: str, key: str, entry: str) -> None:
        """Once per record: a redelivery keeps the reflection's place in its window."""
        await self._run(
            "INSERT OR IGNORE INTO reflections (workspace, key, scope, entry, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                workspace,
                key,
                window,
                self._seal(entry, "reflections", workspace, key),
                self._clock(),
            ),
        )

    async def reflections(
        self, workspace: str, window: str, limit: int, *, before: str | None = None
    ) -> list[str]:
        """The window's last ``limit`` reflections, oldest first; with ``before``, those
        made before that record's (all of them while it has none)."""
        if limit <= 0:
            return []
        rows = await self._run(
            "SELECT entry, key FROM reflections WHERE workspace = ? AND scope = ? AND rowid < "
            "COALESCE((SELECT rowid FROM reflections WHERE workspace = ? AND key = ?), "
            "9223372036854775807) ORDER BY rowid DESC LIMIT ?",
            (workspace, window, workspace, before or "", limit),
            fetch=True,
            many=True,
        )
        return [self._open_text(row[0], "reflections", workspace, row[1]) for row in reversed(rows)]

    def _seal(self, text: str, *row: str) -> str:
        return text if self._cipher is None else self._cipher.seal(text, *row)

    def _open_text(self, stored: str, *row: str) -> str:
        return str(stored) if self._cipher is None else self._cipher.open(str(stored), *row)

    # -- forgetting ------------------------------------------------------------------------
    async def forget(self, workspace: str, collection: str, user: str) -> dict[str, int]:
        """Delete ``user``'s records, trajectories and reflections in ``collection`` (``""``:
        every collection), then checkpoint and truncate the write-ahead log so no copy of
        them stays in a file; counts by kind. Records saved before owners were kept (no
        ``user`` column value) are not found here: the retention prunes them."""
        return await asyncio.to_thread(self._full_mapped, self._forget, workspace, collection, user)

    def _forget(self, workspace: str, collection: str, user: str) -> dict[str, int]:
        any_collection = "" if collection else "1"
        wheres = {
            "ledger": "user = ? AND (collection = ? OR ? = '1')",
            # Owner columns; rows saved before them have only their (plain) body's.
            "trajectories": "COALESCE(user, CASE WHEN json_valid(body) "
            "THEN json_extract(body, '$.user') END) = ? AND (COALESCE(collection, CASE WHEN "
            "json_valid(body) THEN json_extract(body, '$.collection') END) = ? OR ? = '1')",
            "reflections": "json_extract(scope, '$[2]') = ? "
            "AND (json_extract(scope, '$[0]') = ? OR ? = '1')",
        }
        removed: dict[str, int] = {}
        with self._lock:
            if self._db is None:
                raise NotStarted(f"ledger {self.path} is not open")
            for table, where in wheres.items():
                cursor = self._db.execute(
                    f"DELETE FROM {table} WHERE workspace = ? AND {where}",
                    (workspace, user, collection, any_collection),
                )
                removed[table] = cursor.rowcount
            self._db.execute(
                "INSERT OR REPLACE INTO forgotten VALUES (?, ?, ?, ?)",
                (workspace, _digest(workspace, user), collection, self._clock()),
            )
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    async def forgotten_since(
        self, workspace: str, collection: str, user: str, when: float
    ) -> bool:
        """Whether ``user`` (in ``collection``) was forgotten at or after ``when``: work
        about them from before the forget (queued, or redelivered) is then not learned."""
        found = await self._run(
            "SELECT 1 FROM forgotten WHERE workspace = ? AND owner = ? "
            "AND (collection = ? OR collection = '') AND updated_at >= ? LIMIT 1",
            (workspace, _digest(workspace, user), collection, when),
            fetch=True,
        )
        return found is not None

    async def _run(
        self, sql: str, args: tuple[Any, ...], *, fetch: bool = False, many: bool = False
    ) -> Any:
        return await asyncio.to_thread(self._full_mapped, self._execute, sql, args, fetch, many)

    def _full_mapped(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_FULL:
                where = self.floor.describe() if self.floor else f"ledger {self.path}"
                raise DiskFull(f"{where}: {exc}; nothing was written") from exc
            raise

    def _execute(self, sql: str, args: tuple[Any, ...], fetch: bool, many: bool) -> Any:
        with self._lock:
            if self._db is None:
                raise NotStarted(f"ledger {self.path} is not open")
            cursor = self._db.execute(sql, args)
            found = (cursor.fetchall() if many else cursor.fetchone()) if fetch else None
            if self._clock() - self._pruned_at > self._prune_every():
                self._prune(self._db)
            return found

    def _prune_every(self) -> float:
        periods = [self._retention, *(s for s in self._overrides().values() if s is not None)]
        return min(PRUNE_EVERY, min(periods) / 24)

    def _prune(self, db: sqlite3.Connection) -> None:
        self._pruned_at = now = self._clock()
        own = self._overrides()
        others = f" AND workspace NOT IN ({', '.join('?' * len(own))})" if own else ""
        for table in _TABLES:
            db.execute(
                f"DELETE FROM {table} WHERE updated_at < ?{others}",
                (now - self._retention, *own),
            )
            for workspace, seconds in own.items():
                if seconds is not None:
                    db.execute(
                        f"DELETE FROM {table} WHERE workspace = ? AND updated_at < ?",
                        (workspace, now - seconds),
                    )


def _digest(workspace: str, user: str) -> str:
    """An owner in a tombstone: a forgotten user's id is not kept (DESIGN: forget)."""
    return hashlib.sha256(f"{workspace}\0{user}".encode()).hexdigest()
