"""The edge store in a child process: the service's loop never waits on the engine.

The engine's binding holds the GIL for the whole of every call, so in the service's process
its open of a swapped-in shard, its close of the replaced one and its own flush stalled
every request (34-87 ms of CPU each, far more wall time on a loaded machine). Here an
:class:`~memory_services.store.edge.EdgeStore` runs in a child process
(``python -m memory_services.store.host``), one per store directory, and
:class:`HostedStore` implements the same seam by sending each call's plain arguments
(the store's own dataclasses, pickled) over a socket pair and awaiting the reply: the
service's loop serves meanwhile. A call costs a round trip (``benchmarks/store_hop.py``).

Faults: if the child dies (killed, crashed), every call in flight fails with a
:class:`TransientError` saying so (it may or may not have been applied; every store call is
idempotent, and the service's retry policy repeats it), and a new child is started at once,
opening the store again and ensuring the collections ensured before: nothing acknowledged is
lost, the write-ahead log being replayed as after any crash. Calls made meanwhile wait for
it. ``close`` closes the child's store (flushing it) and waits for the child to exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_services.store import host_wire
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    CollectionSpec,
    Condition,
    Hit,
    Record,
    Retrieval,
    StoreScope,
)
from react_mem.errors import TransientError

logger = logging.getLogger(__name__)

#: Seconds a closing child may take to flush and exit before it is killed.
CLOSE_WAIT = 60.0


@dataclass(eq=False)
class _Child:
    """One child process and its calls awaiting a reply."""

    proc: asyncio.subprocess.Process
    writer: asyncio.StreamWriter
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    reading: asyncio.Task[None] | None = None
    gone: bool = False


def _fail(child: _Child) -> None:
    pending, child.pending = child.pending, {}
    for future in pending.values():
        if not future.done():
            future.set_exception(
                TransientError(
                    f"the edge store host (pid {child.proc.pid}) exited during the call; "
                    "it may or may not have been applied"
                )
            )


class HostedStore:
    """:class:`~memory_services.store.base.VectorStore` on an edge store at ``path`` run
    by a child process; ``settings`` are :class:`EdgeStore`'s keyword arguments."""

    def __init__(
        self,
        path: Path,
        *,
        on_indexed: Callable[[str, float], None] | None = None,
        **settings: Any,
    ) -> None:
        self.path = path
        self.settings = settings
        #: Told of each automatic indexing run in the child: the collection and its seconds.
        self.on_indexed = on_indexed or (lambda collection, seconds: None)
        self.indexed = 0
        self.last_index_seconds = 0.0
        #: Children started after one died (a fault, not the first start).
        self.restarts = 0
        self._specs: dict[str, CollectionSpec] = {}
        self._child: _Child | None = None
        self._starting = asyncio.Lock()
        self._ids = itertools.count(1)
        self._opened = self._closed = False
        self._restarting: asyncio.Task[None] | None = None

    @property
    def index_after(self) -> int:
        return int(self.settings.get("index_after", 20_000))

    @property
    def pid(self) -> int | None:
        """The child's process id (None while none runs)."""
        child = self._child
        return None if child is None or child.gone else child.proc.pid

    # -- the child's life ---------------------------------------------------------------
    async def open(self) -> None:
        self._closed = False
        await self._connection()
        self._opened = True

    async def _connection(self) -> _Child:
        if self._closed:
            raise TransientError("edge store host is closed")
        child = self._child
        if child is not None and not child.gone:
            return child
        async with self._starting:
            child = self._child
            if child is None or child.gone:
                if child is not None:  # its lock on the directory ends with it
                    await self._end(child)
                    self.restarts += 1
                child = self._child = await self._start()
        return child

    async def _start(self) -> _Child:
        ours, theirs = socket.socketpair()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "memory_services.store.host", str(theirs.fileno()),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        child = _Child(proc, writer)
        child.reading = asyncio.create_task(self._read(child, reader), name="store-host-read")
        writer.write(host_wire.frame((str(self.path), self.settings)))
        try:
            await self._send(child, "open", (), {})
            for spec in list(self._specs.values()):  # a restart: what was ensured before
                await self._send(child, "ensure", (spec,), {})
        except BaseException:
            await self._end(child)
            raise
        return child

    async def _read(self, child: _Child, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, key, value = await host_wire.read(reader)
                if kind == "indexed":
                    self._heard_indexed(key, value)
                    continue
                future = child.pending.pop(key, None)
                if future is None or future.done():
                    continue
                if kind == "ok":
                    future.set_result(value)
                else:
                    future.set_exception(host_wire.raised(value))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:  # a reply that cannot be read: the child is of no more use
            logger.exception("edge store host (pid %d): bad reply", child.proc.pid)
            with contextlib.suppress(ProcessLookupError):
                child.proc.kill()
        finally:
            self._lost(child)

    def _heard_indexed(self, collection: str, seconds: float) -> None:
        self.indexed += 1
        self.last_index_seconds = seconds
        try:
            self.on_indexed(collection, seconds)
        except Exception:  # a metric's failure must not end the reader
            logger.exception("edge store host: on_indexed failed")

    def _lost(self, child: _Child) -> None:
        """The child's end closed: fail what was in flight, and start another (a fault)."""
        _fail(child)
        if child.gone:
            return
        child.gone = True
        if self._closed or self._child is not child:
            return
        logger.warning("edge store host (pid %d) exited: starting another", child.proc.pid)
        self._restarting = asyncio.ensure_future(self._restart())

    async def _restart(self) -> None:
        try:
            await self._connection()
        except Exception:
            # The next call tries again (and fails with the reason meanwhile).
            logger.exception("edge store host: restarting failed")

    async def _end(self, child: _Child) -> None:
        child.gone = True
        _fail(child)
        child.writer.close()
        if child.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.proc.kill()
        await child.proc.wait()
        if child.reading is not None and child.reading is not asyncio.current_task():
            await asyncio.gather(child.reading, return_exceptions=True)

    async def close(self) -> None:
        self._closed = True
        if self._restarting is not None:
            await asyncio.gather(self._restarting, return_exceptions=True)
        async with self._starting:  # a start under way ends first
            child, self._child = self._child, None
        if child is None:
            return
        try:
            if not child.gone:  # a child that hangs is killed: its log keeps what it acked
                await asyncio.wait_for(self._send(child, "close", (), {}), CLOSE_WAIT)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(child.proc.wait(), CLOSE_WAIT)
        except TimeoutError:
            raise TransientError(
                f"the edge store host did not close within {CLOSE_WAIT:.0f} s: killed"
            ) from None
        finally:
            await self._end(child)

    # -- calls --------------------------------------------------------------------------
    async def _send(
        self, child: _Child, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if child.gone:
            raise TransientError("the edge store host exited")
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        child.pending[call_id] = future
        try:
            child.writer.write(host_wire.frame((call_id, method, args, kwargs)))
            await child.writer.drain()
        except ConnectionError:
            pass  # the reader sees the end too and fails the call
        try:
            return await future
        finally:
            child.pending.pop(call_id, None)

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._send(await self._connection(), method, args, kwargs)

    async def ensure(self, spec: CollectionSpec) -> None:
        await self._call("ensure", spec)
        self._specs.setdefault(spec.name, spec)

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        await self._call("upsert", collection, list(records))

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        text: str | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[Hit]:
        hits: list[Hit] = await self._call(
            "search", collection, vector, scope=scope, limit=limit, min_score=min_score,
            where=where, text=text, retrieval=retrieval, boost=boost, leave_out=leave_out,
        )  # fmt: skip
        return hits

    async def search_many(
        self,
        collection: str,
        vectors: Sequence[Sequence[float]],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        texts: Sequence[str] | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[list[Hit]]:
        hits: list[list[Hit]] = await self._call(
            "search_many", collection, vectors, scope=scope, limit=limit,
            min_score=min_score, where=where, texts=texts, retrieval=retrieval, boost=boost,
            leave_out=leave_out,
        )  # fmt: skip
        return hits

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        found: list[Record] = await self._call("get", collection, ids, scope=scope)
        return found

    async def scroll(
        self,
        collection: str,
        *,
        scope: StoreScope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        page: tuple[list[Record], str | None] = await self._call(
            "scroll", collection, scope=scope, where=where, limit=limit, offset=offset
        )
        return page

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int:
        return int(await self._call("count", collection, scope=scope, where=where))

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        await self._call("set_payload", collection, ids, dict(payload), scope=scope)

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        return int(await self._call("delete", collection, scope=scope, ids=ids, where=where))

    async def compact(self, collection: str) -> bool:
        return bool(await self._call("compact", collection))

    # -- the edge store's upkeep, as on EdgeStore -----------------------------------------
    async def flush(self) -> None:
        await self._call("flush")

    async def optimize(self, collection: str) -> bool:
        return bool(await self._call("optimize", collection))

    async def index_due(self, *, idle: bool = False) -> list[str]:
        done: list[str] = await self._call("index_due", idle=idle)
        return done

    async def trim(self, *, data: bool = True) -> dict[str, int]:
        resident: dict[str, int] = await self._call("trim", data=data)
        return resident
