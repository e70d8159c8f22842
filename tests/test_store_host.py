"""The edge store hosted by a child process: faults and shutdown through the store seam and
through a fact-memory service on the bus. (The VectorStore contract itself runs against the
hosted store in tests/test_vector_store.py and its siblings: the ``hosted`` backend.)"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.retry import RetryingStore
from memory_services.store import CollectionSpec, EdgeStore, Record, Scope, hosted
from memory_services.store.host_wire import RemoteTraceback
from memory_services.store.hosted import HostedStore
from react_mem.bus.pulsar import PulsarTransport
from react_mem.errors import BadRequest, TransientError
from react_mem.ownership import DirectoryInUse, DirectoryOwner
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service
from tests.support.recording import eventually

SPEC = CollectionSpec("notes-4", 4, text_fields=("text",))
C = SPEC.name
HOME, OTHER = Scope("ws-a", "default", "ann"), Scope("ws-a", "default", "bob")


def notes(scope: Scope, n: int) -> list[Record]:
    return [
        Record(str(uuid.uuid4()), {**scope.payload(), "text": f"note {i} on Quillon"}, [1, i, 0, 0])
        for i in range(n)
    ]


def ids(records: Sequence[Record]) -> set[str]:
    return {r.id for r in records}


async def everything(store: Any, scope: Scope) -> set[str]:
    page, _ = await store.scroll(C, scope=scope, limit=1000)
    return ids(page)


async def opened(path: Path, **settings: Any) -> HostedStore:
    # No periodic flush: what is acknowledged lives only in the write-ahead log.
    store = HostedStore(path, **({"flush_interval": 0} | settings))
    await store.open()
    await store.ensure(SPEC)
    return store


async def stopped_with_a_call_in_flight(store: HostedStore, call: Any) -> asyncio.Task[Any]:
    """Stop the child, then make ``call``: it is sent and cannot be answered."""
    assert store.pid is not None
    os.kill(store.pid, signal.SIGSTOP)
    task = asyncio.ensure_future(call)
    for _ in range(5):  # written to the socket on its first steps
        await asyncio.sleep(0)
    assert not task.done()
    return task


async def test_a_killed_host_restarts_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    store = await opened(tmp_path / "edge")
    try:
        mine, theirs = notes(HOME, 120), notes(OTHER, 5)
        await store.upsert(C, mine)
        await store.upsert(C, theirs)
        await store.set_payload(C, [mine[0].id], {"seen": True}, scope=HOME)
        await store.delete(C, scope=HOME, ids=[mine[1].id])
        first = store.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # no flush, no close
        await eventually(lambda: store.restarts == 1 and store.pid not in (None, first), 60)
        # The collection was ensured again by the new child; every acknowledged write is there.
        assert await everything(store, HOME) == ids(mine[2:]) | {mine[0].id}
        assert await everything(store, OTHER) == ids(theirs)
        (got,) = await store.get(C, [mine[0].id], scope=HOME)
        assert got.payload["seen"] is True
        # Errors still cross as themselves, with the child's traceback attached.
        with pytest.raises(BadRequest) as caught:
            await store.search(C, [1, 0], scope=HOME, limit=3)
        assert isinstance(caught.value.__cause__, RemoteTraceback)
    finally:
        await store.close()


async def test_a_call_in_flight_fails_clearly_and_the_next_waits_for_the_restart(
    tmp_path: Path,
) -> None:
    store = await opened(tmp_path / "edge")
    try:
        kept = notes(HOME, 3)
        await store.upsert(C, kept)
        first = store.pid
        assert first is not None
        task = await stopped_with_a_call_in_flight(store, store.count(C, scope=HOME))
        os.kill(first, signal.SIGKILL)
        with pytest.raises(TransientError, match="exited during the call"):
            await task
        # Made at once: it waits for the new child rather than failing.
        assert await everything(store, HOME) == ids(kept)
        assert store.pid != first and store.restarts == 1
    finally:
        await store.close()


async def test_the_retry_policy_carries_a_write_across_a_killed_host(tmp_path: Path) -> None:
    hosted = await opened(tmp_path / "edge")
    store = RetryingStore(hosted)
    try:
        record = notes(HOME, 1)
        assert hosted.pid is not None
        task = await stopped_with_a_call_in_flight(hosted, store.upsert(C, record))
        os.kill(hosted.pid, signal.SIGKILL)
        await task  # failed once, repeated on the new child
        assert await everything(store, HOME) == ids(record)
    finally:
        await store.close()


async def test_close_flushes_and_ends_the_child(tmp_path: Path) -> None:
    store = await opened(tmp_path / "edge")
    written = notes(HOME, 10)
    await store.upsert(C, written)
    child = store._child
    assert child is not None
    await store.close()
    assert child.proc.returncode == 0 and store.pid is None
    with pytest.raises(TransientError, match="closed"):
        await store.count(C, scope=HOME)
    again = EdgeStore(tmp_path / "edge")  # the directory is free, the writes are there
    await again.open()
    await again.ensure(SPEC)
    try:
        assert await everything(again, HOME) == ids(written)
    finally:
        await again.close()


async def test_a_hung_child_is_killed_at_close_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosted, "CLOSE_WAIT", 0.5)
    store = await opened(tmp_path / "edge")
    written = notes(HOME, 10)
    await store.upsert(C, written)
    assert store.pid is not None
    os.kill(store.pid, signal.SIGSTOP)  # hangs: the close is never answered
    with pytest.raises(TransientError, match="did not close"):
        await store.close()
    again = await opened(tmp_path / "edge")  # killed: the directory is free
    try:
        assert await everything(again, HOME) == ids(written)
    finally:
        await again.close()


DYING_PARENT = """
import asyncio, os, pathlib, signal, sys, uuid
from memory_services.store import CollectionSpec, Record
from memory_services.store.hosted import HostedStore
async def main():
    store = HostedStore(pathlib.Path(sys.argv[1]), flush_interval=0)
    await store.open()
    await store.ensure(CollectionSpec("notes-4", 4, text_fields=("text",)))
    payload = {"scope_workspace": "ws-a", "scope_collection": "default", "scope_user": "ann"}
    await store.upsert("notes-4", [Record(sys.argv[2], payload, [1, 0, 0, 0])])
    print(store.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # the service dies; its store's child must not stay
asyncio.run(main())
"""


async def test_a_host_whose_service_died_closes_and_frees_the_directory(tmp_path: Path) -> None:
    written = str(uuid.uuid4())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DYING_PARENT, str(tmp_path / "edge"), written,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    child = int(out.split()[0])

    def free() -> bool:
        try:
            DirectoryOwner(tmp_path / "edge", "test").take().release()
        except DirectoryInUse:
            return False
        return True

    def ended() -> bool:  # exited (a zombie until whoever adopted it reaps it)
        try:
            return Path(f"/proc/{child}/stat").read_text().split(") ")[1][0] in "ZX"
        except FileNotFoundError:
            return True

    await eventually(free, timeout=60)
    await eventually(ended, timeout=60)  # not left orphaned
    store = await opened(tmp_path / "edge")
    try:
        assert await everything(store, HOME) == {written}
    finally:
        await store.close()


async def test_index_runs_in_the_child_are_heard(tmp_path: Path) -> None:
    heard: list[tuple[str, float]] = []
    store = await opened(
        tmp_path / "edge", index_after=50, on_indexed=lambda c, s: heard.append((c, s))
    )
    try:
        written = notes(HOME, 80)
        await store.upsert(C, written)
        assert await store.index_due(idle=True) == [C]
        assert heard == [(C, store.last_index_seconds)] and store.indexed == 1
        assert await everything(store, HOME) == ids(written)  # served from the new shard
    finally:
        await store.close()


async def test_a_second_host_on_one_directory_is_refused(tmp_path: Path) -> None:
    store = await opened(tmp_path / "edge")
    try:
        with pytest.raises(DirectoryInUse):
            await HostedStore(tmp_path / "edge").open()
        assert await store.count(C, scope=HOME) == 0
    finally:
        await store.close()


# -- a memory service over the bus --------------------------------------------------------
fact_service = functools.partial(
    shared_fact_service, client=FactService, embedder=HashingEmbedder(), edge_hosted=True
)


async def test_a_fact_service_keeps_serving_across_a_killed_store_host(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(transport, registry, tmp_path, unique) as facts:
        before = await facts.store("Ann keeps bees", "Ann's sister lives in Leeds", user="ann")
        hosted = facts.processor.store.inner  # type: ignore[attr-defined]
        assert isinstance(hosted, HostedStore)
        first = hosted.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        # The next request is answered (retried onto the new child) and nothing is lost.
        after = await facts.store("Ann plays the cello", user="ann")
        listed = {f.id for f in await facts.listed(user="ann")}
        assert listed == set(before) | set(after)
        assert hosted.pid not in (None, first) and hosted.restarts == 1


def test_settings_choose_the_hosted_store(tmp_path: Path) -> None:
    from memory_services.runtime import MemorySettings, make_store

    settings = MemorySettings.load(
        {"id": "fact-memory", "state_dir": tmp_path, "edge_hosted": True, "edge_index_after": 7}
    )
    store = make_store(settings, on_indexed=print)
    assert isinstance(store, HostedStore) and store.path == settings.store_dir
    assert store.index_after == 7 and store.on_indexed is print
    assert store.settings["resident_mib"] == settings.edge_resident_mib
    plain = make_store(MemorySettings.load({"id": "f", "state_dir": tmp_path}))
    assert isinstance(plain, EdgeStore)  # off by default
