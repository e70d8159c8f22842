"""The child process of a hosted edge store: an :class:`EdgeStore` on its own event loop,
serving the calls its parent's :class:`~memory_services.store.hosted.HostedStore` sends.

``python -m memory_services.store.host <fd>``: ``fd`` is this end of a socket pair. The first
message is the store's directory and settings; every later one a call (see
:mod:`.host_wire`), each run as a task of its own, so calls interleave here as they would in
the parent (a search is served between a long delete's steps). The engine holds the GIL of
this process, not of the service's: a flush, an index swap's open and close stall this loop
only. The store closes (flushing) on a ``close`` call or when the parent's end closes (the
parent exited); a kill loses nothing acknowledged, as for the store in process (its
write-ahead log is replayed when the next child opens it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

from memory_services.store import host_wire
from memory_services.store.edge import EdgeStore

logger = logging.getLogger(__name__)

#: The store's methods a parent may call (the VectorStore seam and the edge store's upkeep).
CALLS = frozenset(
    {
        "open",
        "ensure",
        "upsert",
        "search",
        "search_many",
        "get",
        "scroll",
        "count",
        "set_payload",
        "delete",
        "compact",
        "close",
        "flush",
        "optimize",
        "index_due",
        "trim",
    }
)


def served(method: str) -> str:
    if method not in CALLS:
        raise AttributeError(f"the edge store host serves no call {method!r}")
    return method


class Host:
    """One store and the calls in flight on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.store: EdgeStore | None = None
        self.calls: set[asyncio.Task[None]] = set()
        self.closed = asyncio.Event()

    def send(self, message: host_wire.Reply) -> None:
        if not self.writer.is_closing():
            self.writer.write(host_wire.frame(message))

    async def serve(self) -> None:
        path, settings = await host_wire.read(self.reader)
        self.store = EdgeStore(Path(path), on_indexed=self.indexed, **settings)
        reading = asyncio.ensure_future(self._read())
        closing = asyncio.ensure_future(self.closed.wait())
        await asyncio.wait({reading, closing}, return_when=asyncio.FIRST_COMPLETED)
        reading.cancel()
        closing.cancel()
        if self.calls:
            await asyncio.wait(self.calls)
        if not self.closed.is_set():  # the parent went away without a close: close here
            with contextlib.suppress(Exception):
                await self.store.close()
        with contextlib.suppress(Exception):
            await self.writer.drain()
        self.writer.close()

    def indexed(self, collection: str, seconds: float) -> None:
        self.send(("indexed", collection, seconds))

    async def _read(self) -> None:
        while True:
            try:
                call_id, method, args, kwargs = await host_wire.read(self.reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            task = asyncio.ensure_future(self._call(call_id, method, args, kwargs))
            self.calls.add(task)
            task.add_done_callback(self.calls.discard)

    async def _call(self, call_id: int, method: str, args: Any, kwargs: Any) -> None:
        assert self.store is not None
        try:
            result = await getattr(self.store, served(method))(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every error crosses to the caller
            self.send(("err", call_id, host_wire.error(exc)))
        else:
            self.send(("ok", call_id, result))
        if method == "close":
            self.closed.set()
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()


async def main_async(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    await Host(reader, writer).serve()


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, format=f"store host {os.getpid()}: %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(main_async(int(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
