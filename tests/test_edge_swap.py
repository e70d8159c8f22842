"""An index swap's new shard opens with an empty log, and nothing is lost by it.

The index builder writes every point through its shard's log; the serving process's open would
read that log whole and check it, holding the GIL. The builder replaces it with an empty log
carried past the build's operation numbers (``edge_build.fresh_log``): the engine skips an
update numbered below a point's version, so a log restarted at 0 would silently drop updates to
the points the build wrote. These tests pin both: the log is empty, and updates, deletes and
re-upserts of built points apply, across a restart and a killed process."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from pathlib import Path

import numpy as np

from memory_services.store import CollectionSpec, EdgeStore, Record, Scope, edge_build

SPEC = CollectionSpec("notes-8", 8)
HOME = Scope("ws-a", "default", "alice")


def records(count: int, seed: int = 0) -> list[Record]:
    vectors = np.random.default_rng(seed).standard_normal((count, 8), dtype=np.float32)
    return [
        Record(str(uuid.uuid4()), HOME.payload() | {"n": n}, v.tolist())
        for n, v in enumerate(vectors)
    ]


def log_bytes(root: Path) -> int:
    """Bytes the live shard's log files hold on disk (its segments are preallocated sparse)."""
    wal = edge_build.live_path(root, SPEC.name) / "wal"
    return sum(f.stat().st_blocks * 512 for f in wal.iterdir() if f.is_file())


async def opened(root: Path) -> EdgeStore:
    store = EdgeStore(root, flush_interval=0, index_after=0)
    await store.open()
    await store.ensure(SPEC)
    return store


async def built(root: Path, count: int) -> list[Record]:
    """A store of ``count`` points, indexed once (a build and a swap), closed."""
    written = records(count)
    store = await opened(root)
    try:
        for first in range(0, count, 500):
            await store.upsert(SPEC.name, written[first : first + 500])
        assert log_bytes(root) > 256 * 1024  # what the live shard's log holds of them
        await store.optimize(SPEC.name)
        assert edge_build.live_path(root, SPEC.name).name == f"{SPEC.name}@1"
        assert log_bytes(root) < 64 * 1024  # the build's copy of every point is not there
    finally:
        await store.close()
    return written


async def test_a_swapped_in_shard_opens_with_an_empty_log(tmp_path: Path) -> None:
    root = tmp_path / "edge"
    written = await built(root, 3_000)
    store = await opened(root)
    try:
        assert await store.count(SPEC.name, scope=HOME) == len(written)
        got = await store.get(SPEC.name, [r.id for r in written[::97]], scope=HOME)
        assert {r.id: r.payload["n"] for r in got} == {r.id: r.payload["n"] for r in written[::97]}
    finally:
        await store.close()


def moved(record: Record) -> Record:
    return Record(record.id, record.payload | {"n": -1}, [1.0] + [0.0] * 7)


async def test_built_points_take_updates_after_a_swap_across_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "edge"
    written = await built(root, 3_000)
    store = await opened(root)
    try:
        await store.set_payload(SPEC.name, [written[0].id], {"seen": 1}, scope=HOME)
        assert await store.delete(SPEC.name, scope=HOME, ids=[written[1].id]) == 1
        await store.upsert(SPEC.name, [moved(written[2])])
        await check(store, written)
    finally:
        await store.close()
    again = await opened(root)
    try:
        await check(again, written)
    finally:
        await again.close()


async def check(store: EdgeStore, written: list[Record]) -> None:
    got = {r.id: r for r in await store.get(SPEC.name, [r.id for r in written[:3]], scope=HOME)}
    assert set(got) == {written[0].id, written[2].id}
    assert got[written[0].id].payload.get("seen") == 1
    assert got[written[2].id].payload["n"] == -1
    [hit] = await store.search(SPEC.name, [1.0] + [0.0] * 7, scope=HOME, limit=1)
    assert hit.id == written[2].id
    assert await store.count(SPEC.name, scope=HOME) == len(written) - 1


KILLED_UPDATER = """
import asyncio, os, pathlib, signal, sys
from memory_services.store import CollectionSpec, EdgeStore, Record, Scope
HOME = Scope("ws-a", "default", "alice")
async def main():
    store = EdgeStore(pathlib.Path(sys.argv[1]), flush_interval=0, index_after=0)
    await store.open()
    await store.ensure(CollectionSpec("notes-8", 8))
    seen, gone, moved = sys.argv[2:5]
    await store.set_payload("notes-8", [seen], {"seen": 1}, scope=HOME)
    assert await store.delete("notes-8", scope=HOME, ids=[gone]) == 1
    await store.upsert("notes-8", [Record(moved, HOME.payload() | {"n": -1}, [1.0] + [0.0] * 7)])
    os.kill(os.getpid(), signal.SIGKILL)  # no flush, no close: the log is all there is
asyncio.run(main())
"""


async def test_built_points_take_updates_after_a_swap_across_a_killed_process(
    tmp_path: Path,
) -> None:
    root = tmp_path / "edge"
    written = await built(root, 3_000)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        KILLED_UPDATER,
        str(root),
        *(r.id for r in written[:3]),
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == -signal.SIGKILL, stderr.decode()
    store = await opened(root)
    try:
        await check(store, written)
    finally:
        await store.close()
