"""The side store of fact access statistics: one SQLite file per service (or in memory).

A row holds what retrievals added to one fact since its record last took them in: how many
(``count``) and the latest (``last``), with the fact's owner (workspace, collection, user;
``""`` for none) so an owner's rows go with the owner's facts. SQLite because it ships with
Python, keeps the rows on disk rather than in the process, updates a row in place (an append
log would grow with every retrieval and need compacting), and deletes with
``secure_delete`` (a deleted row's bytes are zeroed) so forgetting leaves nothing behind
once the write-ahead log is truncated (:meth:`AccessTable.wipe`).

Calls run on the event loop: a write is one transaction of a few rows into the write-ahead
log (no fsync at ``synchronous=NORMAL``; tens of microseconds) and a read one indexed
``SELECT``. The fsyncs happen at checkpoints, which the table never runs on the loop
(``wal_autocheckpoint`` off): :meth:`checkpoint` runs one in a worker thread on a connection
of its own (the sqlite3 module releases the GIL while SQLite works).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from react_mem.errors import NotStarted

#: (workspace, collection, user or "").
OwnerKey = tuple[str, str, str]
#: A fact id, its owner, retrievals not yet in its record, and the latest one.
Row = tuple[str, OwnerKey, int, float]

#: Ids per statement (SQLite allows 32,766 parameters; small chunks keep each call short).
_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS access (
    id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    collection TEXT NOT NULL,
    user TEXT NOT NULL,
    count INTEGER NOT NULL,
    last REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS access_owner ON access (workspace, collection, user);
"""


class AccessTable:
    def __init__(self, path: Path | None) -> None:
        """``path``: the file (created with its directory); None: in memory."""
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._checkpointing = threading.Lock()

    async def open(self) -> None:
        if self._db is None:
            self._db = await asyncio.to_thread(self._connect)

    def _connect(self) -> sqlite3.Connection:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            ":memory:" if self.path is None else self.path,
            check_same_thread=False,  # opened in a worker thread, used on the loop
            isolation_level=None,  # transactions are explicit
        )
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "secure_delete=ON",
            "wal_autocheckpoint=0",
        ):
            db.execute(f"PRAGMA {pragma}")
        db.executescript(_SCHEMA)
        return db

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise NotStarted("the access table is not open")
        return self._db

    def add(self, rows: Iterable[Row]) -> None:
        """Add retrievals: counts add up, the latest time stays."""
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO access VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "count = count + excluded.count, last = max(last, excluded.last)",
                [(id, *owner, count, last) for id, owner, count, last in rows],
            )

    def read(self, ids: Sequence[str]) -> dict[str, Row]:
        found: dict[str, Row] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for id, ws, coll, user, count, last in self.db.execute(
                f"SELECT id, workspace, collection, user, count, last FROM access "
                f"WHERE id IN ({marks})",
                chunk,
            ):
                found[id] = (id, (ws, coll, user), int(count), float(last))
        return found

    def ids_of(self, workspace: str, collection: str, user: str | None) -> list[str]:
        """The ids with rows of one owner, or (``user`` None) of every owner of a collection."""
        if user is None:
            query = "SELECT id FROM access WHERE workspace = ? AND collection = ?"
            return [r[0] for r in self.db.execute(query, (workspace, collection))]
        query = "SELECT id FROM access WHERE workspace = ? AND collection = ? AND user = ?"
        return [r[0] for r in self.db.execute(query, (workspace, collection, user))]

    def drop(self, owner: OwnerKey, ids: Sequence[str]) -> None:
        with self._transaction() as db:
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                db.execute(
                    f"DELETE FROM access WHERE workspace = ? AND collection = ? AND user = ? "
                    f"AND id IN ({marks})",
                    (*owner, *chunk),
                )

    def drop_owner(self, owner: OwnerKey) -> int:
        with self._transaction() as db:
            query = "DELETE FROM access WHERE workspace = ? AND collection = ? AND user = ?"
            return db.execute(query, owner).rowcount

    def size(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM access").fetchone()[0])

    async def checkpoint(self, *, truncate: bool = False) -> None:
        """Move the write-ahead log into the file (the fsyncs), off the loop; ``truncate``:
        and empty the log, so no deleted row's old page stays in it."""
        if self.path is None or self._db is None:
            return
        mode = "TRUNCATE" if truncate else "PASSIVE"
        await asyncio.to_thread(self._checkpoint, self.path, mode)

    def _checkpoint(self, path: Path, mode: str) -> None:
        with self._checkpointing, contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA busy_timeout=5000")
            db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()

    async def wipe(self) -> None:
        """After deletions that must leave no byte on disk: the log emptied."""
        await self.checkpoint(truncate=True)

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.to_thread(_close, db, self.path is not None)

    def _transaction(self) -> _Transaction:
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, *_: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def _close(db: sqlite3.Connection, on_disk: bool) -> None:
    if on_disk:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield list(ids[start : start + _CHUNK])
