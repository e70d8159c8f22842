"""The longest event-loop stall under sustained writes to the edge store.

A ticker task sleeps 1 ms at a time and records how late each wake-up is: every engine call,
flush and maintenance step that holds the loop (or the GIL) shows as lateness. Beside it a
writer upserts ``--batch`` fact-like points ``--rate`` times a second (and gives as many a new
payload) into a store preloaded with ``--points`` points, for ``--seconds`` seconds; with
``--delete N`` it also deletes N of the points it wrote every ``--delete-every`` seconds, and
``--index-at T`` starts an index run (a child builds an indexed copy, then the swap: open the
copy, catch up, close the old shard) T seconds into the window, which then lasts until the
run is done. It prints the longest stall, p99.9 and p99 of the lateness, the stalls over
50 ms, and the longest stall within each kind of storage work (a flush, one that was the
engine's own, an index run's export and build, its swap and the swap's two engine calls,
open and close, the sync before the close (in a thread), a delete and each of its steps:
from 50 ms before it starts to its end), then each kind's count and durations (and the
engine calls' CPU time in their thread, which a loaded machine inflates far less than their
wall time, the loop's stall), for each ``--mode`` side by side in one run (each on a fresh
copy of the store, synced first; ``--rounds`` runs them interleaved, pooled):

- ``log``: the store as it runs (maintenance every 5 s: the flush, which fsyncs each
  written shard's write-ahead log in a worker thread, then indexing and paging out; writes
  and deletes in chunks with the loop free between; the swap reads the new shard's files
  in a worker thread before opening it, writes and syncs its pointer off the loop, catches
  up 64 points a call and closes the old shard without a second flush);
- ``log-prior``: ``log`` with the swap as it was before the builder started the new shard's
  log afresh (the open then read the build's copy of every point in it) and before the
  replaced shard's files were synced in a worker thread ahead of its close;
- ``engine``: the behaviour before: every flush the engine's own
  (``EdgeStore(flush_engine=True)``; its binding holds the GIL for the whole flush, so the
  loop stalls for as long as it takes, in a worker thread too), an upsert and a delete in
  one engine call however big (``edge_points.UPSERT_CHUNK`` and ``DELETE_CHUNK``
  unbounded), the swap opening the new shard cold (its log the build's) and flushing the old
  one before closing it, its files not synced first;
- ``hosted``: the store as in ``log``, run by a child process
  (:class:`~memory_services.store.hosted.HostedStore`): every call a round trip over a socket
  pair, the engine's calls holding the child's GIL, not this process's (the storage work
  happens in the child, so only the calls' latency and the index runs are timed here);
- ``frozen``: ``hosted`` with this process's heap as the run begins (the records it will
  write, made beforehand) moved out of the garbage collector's passes (``gc.freeze()``, as a
  service would once started): a full pass then walks only what the run itself made;
- ``none``: no maintenance, deletes or index runs (what the writes alone cost the loop).

Beside the stalls it prints each write call's latency as the writer saw it (p50, p99.9,
longest): how long a request waited on the store, in whichever process the work ran, and
the longest garbage-collection pass in this process during the window. ``--trace MS``
prints, for each mode's longest stalls over MS, what they were made of
(:mod:`stall_trace`: the loop thread's CPU, run-queue wait and sleep, GC passes, slow
callbacks; it adds a sampling thread, so time figures without it).

    OMP_NUM_THREADS=1 python benchmarks/loop_stall.py --points 100000 --seconds 60
    OMP_NUM_THREADS=1 python benchmarks/loop_stall.py --points 20000 --seconds 30 \
        --delete 1000 --delete-every 10 --index-at 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from memory_services.store import (
    CollectionSpec,
    Record,
    Scope,
    edge_build,
    edge_flush,
    edge_index,
    edge_points,
    edge_shards,
)
from memory_services.store.edge import EdgeStore
from memory_services.store.hosted import HostedStore

sys.path.insert(0, str(Path(__file__).parent))
from stall_trace import StallTrace, descendants, gc_passes

MODES = ["engine", "log-prior", "log", "hosted", "frozen", "none"]
#: The kinds of storage work whose stalls are told apart.
KINDS = [
    "flush",
    "engine flush",
    "index export",
    "swap",
    "swap open",
    "swap close",
    "swap sync",
    "delete",
    "delete step",
    "index run",
]
SPEC = CollectionSpec("facts-384", 384, text_fields=("content",))
SCOPE = Scope("ws", "bench", "alice")
WORDS = "tortoise cello Leeds spring Fiat red sister flat code locker tea garden".split()  # noqa: SIM905


def records(rng: np.random.Generator, count: int) -> list[Record]:
    vectors = rng.standard_normal((count, SPEC.vector_size), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for v in vectors:
        words = " ".join(rng.choice(WORDS, 6))
        payload = SCOPE.payload() | {"content": f"Alice said {words}.", "access_count": 0}
        out.append(Record(str(uuid.uuid4()), payload, v.tolist()))
    return out


async def preload(path: Path, points: int) -> None:
    store = EdgeStore(path, flush_interval=0, index_after=0)
    await store.open()
    await store.ensure(SPEC)
    rng = np.random.default_rng(1)
    for first in range(0, points, 1000):
        await store.upsert(SPEC.name, records(rng, min(1000, points - first)))
    await store.optimize(SPEC.name)
    await store.close()


class Found(NamedTuple):
    """One run's figures: every tick's lateness, the stalls within each kind of storage
    work, each kind's durations (ms), and the index runs."""

    lateness: list[float]
    within: dict[str, list[float]]
    durations: dict[str, list[float]]
    cpu: dict[str, list[float]]
    index_runs: int
    #: Each write call's latency (ms), from the writer's side.
    calls: list[float]
    #: Each garbage collection's pause (ms) in this process during the window.
    collections: list[float]


class Events:
    """When each kind of storage work ran (perf_counter windows), from wrappers around it."""

    def __init__(self) -> None:
        self.windows: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
        #: CPU ms of the engine calls timed in their thread (a machine's load inflates their
        #: wall time, which is the loop's stall, far more than this).
        self.cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}

    def add(self, kind: str, started: float) -> None:
        self.windows[kind].append((started, time.perf_counter()))

    def durations(self) -> dict[str, list[float]]:
        return {k: [(b - a) * 1000 for a, b in w] for k, w in self.windows.items()}

    def within(self, ticks: list[tuple[float, float]]) -> dict[str, list[float]]:
        """Each kind's ticks' lateness, for ticks that began from 50 ms before one of its
        windows to its end."""
        return {
            kind: [late for at, late in ticks if any(a - 0.05 <= at <= b for a, b in windows)]
            for kind, windows in self.windows.items()
        }


@contextmanager
def instrumented(store: EdgeStore, events: Events) -> Iterator[None]:
    """Record the store's flushes (and which were the engine's), index runs and swaps."""
    flusher, indexer = store._flusher, store._indexer
    flush, optimize = flusher.flush, indexer.optimize
    sync_log, finished = edge_flush.sync_log, edge_build.finished
    engine_flushes: list[bool] = []
    built: list[float] = []

    async def timed_flush() -> None:
        started, engine_flushes[:] = time.perf_counter(), []
        await flush()
        events.add("flush", started)
        if flusher.engine or engine_flushes:
            events.add("engine flush", started)

    def noted_sync(root: Any, name: str, limit: int) -> bool:
        synced = sync_log(root, name, limit)
        if not synced:
            engine_flushes.append(True)
        return synced

    async def noted_finish(proc: asyncio.subprocess.Process) -> bool:
        indexed = await finished(proc)
        built.append(time.perf_counter())
        return indexed

    async def timed_optimize(collection: str) -> bool:
        started, built[:] = time.perf_counter(), []
        try:
            return await optimize(collection)
        finally:
            if built:  # the export and build, then the swap
                events.windows["index export"].append((started, built[0]))
                events.add("swap", built[0])

    def timed(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:  # lists append safely from a thread
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                events.add(kind, started)
                events.cpu[kind].append((time.thread_time() - cpu) * 1000)

        return call

    load, close, sync = edge_build.load, edge_index.close, edge_build.sync_files
    edge_build.load, edge_index.close = timed("swap open", load), timed("swap close", close)
    edge_build.sync_files = timed("swap sync", sync)
    store._delete_chunk = timed("delete step", store._delete_chunk)  # type: ignore[method-assign]
    flusher.flush = timed_flush  # type: ignore[method-assign]
    indexer.optimize = timed_optimize  # type: ignore[method-assign]
    edge_flush.sync_log, edge_build.finished = noted_sync, noted_finish
    try:
        yield
    finally:
        edge_flush.sync_log, edge_build.finished = sync_log, finished
        edge_build.load, edge_index.close, edge_build.sync_files = load, close, sync


@contextmanager
def swap_before() -> Iterator[None]:
    """The swap before its new shard's log was started afresh and the replaced shard's files
    synced ahead of its close (what ``log-prior`` compares against)."""
    fresh, sync = edge_build.FRESH_LOG, edge_build.sync_files
    edge_build.FRESH_LOG, edge_build.sync_files = False, lambda path: None
    try:
        yield
    finally:
        edge_build.FRESH_LOG, edge_build.sync_files = fresh, sync


@contextmanager
def behaviour_before() -> Iterator[None]:
    """Upserts and deletes in one engine call; the swap opening the new shard cold, catching
    up 256 points a call, writing and syncing its pointer on the loop, and flushing the
    replaced shard before closing it (what ``engine`` mode compares against)."""
    chunks = edge_points.UPSERT_CHUNK, edge_points.DELETE_CHUNK, edge_index.CATCH_UP_PAGE
    warm, close = edge_build.warm, edge_index.close
    stage, set_live = edge_build.stage_live, edge_build.set_live
    staged: dict[str, Path] = {}

    def set_live_on_the_loop(root: Path, name: str) -> None:  # written and synced there
        stage(root, name, staged[name])
        set_live(root, name)
        edge_build.sync_dir(root)

    edge_points.UPSERT_CHUNK = edge_points.DELETE_CHUNK = 1 << 30
    edge_index.CATCH_UP_PAGE = 256
    edge_build.warm = lambda path: 0
    edge_index.close = lambda shard, flush=True: edge_shards.close(shard, flush=True)
    edge_build.stage_live = lambda root, name, path: staged.update({name: path})
    edge_build.set_live = set_live_on_the_loop
    try:
        yield
    finally:
        edge_points.UPSERT_CHUNK, edge_points.DELETE_CHUNK, edge_index.CATCH_UP_PAGE = chunks
        edge_build.warm, edge_index.close = warm, close
        edge_build.stage_live, edge_build.set_live = stage, set_live


async def run(path: Path, args: argparse.Namespace, mode: str) -> Found:
    interval = 0.0 if mode == "none" else 5.0
    store: EdgeStore | HostedStore
    if mode in ("hosted", "frozen"):  # the child's log bound is the default one
        store = HostedStore(path, flush_interval=interval, index_after=args.index_after)
    else:
        store = EdgeStore(
            path,
            flush_interval=interval,
            flush_engine=mode == "engine",
            index_after=args.index_after,
        )
        store._flusher.log_segments = args.log_segments
    events = Events()
    await store.open()
    await store.ensure(SPEC)
    lateness: list[float] = []
    ticks: list[tuple[float, float]] = []  # (slept from, late ms)
    stop = asyncio.Event()

    trace = StallTrace(args.trace, lambda: descendants(os.getpid())) if args.trace else None

    async def ticker() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            late = (time.perf_counter() - started - 0.001) * 1000
            lateness.append(late)
            ticks.append((started, late))
            if trace is not None:
                trace.tick(started, late)

    # Made before the run: making 500 records holds the loop too, and it is not storage work.
    rng, period = np.random.default_rng(2), 1 / args.rate
    batches = [records(rng, args.batch) for _ in range(int(args.seconds * args.rate) + 1)]
    if mode == "frozen":  # what is here now, a service's after start-up, out of every GC pass
        gc.collect()
        gc.freeze()
    written: list[str] = []
    calls: list[float] = []
    extra = mode != "none"  # deletes and forced index runs
    runs = [asyncio.Event() for _ in (args.index_at if extra else [])]

    async def writer() -> None:
        begun = time.perf_counter()
        ends, deleted_at = begun + args.seconds, begun
        for batch in batches:
            now = time.perf_counter()
            if now >= ends and all(done.is_set() for done in runs):
                break
            started = time.perf_counter()
            await store.upsert(SPEC.name, batch)
            calls.append((time.perf_counter() - started) * 1000)
            ids = [r.id for r in batch]
            written.extend(ids)
            started = time.perf_counter()
            await store.set_payload(SPEC.name, ids, {"access_count": 1}, scope=SCOPE)
            calls.append((time.perf_counter() - started) * 1000)
            if extra and args.delete and now - deleted_at >= args.delete_every:
                doomed, written[: args.delete] = written[: args.delete], []
                started, deleted_at = time.perf_counter(), now
                await store.delete(SPEC.name, scope=SCOPE, ids=doomed)
                events.add("delete", started)
            await asyncio.sleep(period)

    async def index_at(delay: float, done: asyncio.Event) -> None:
        await asyncio.sleep(delay)
        started = time.perf_counter()
        await store.optimize(SPEC.name)
        events.add("index run", started)
        done.set()

    before = contextlib.ExitStack()
    if mode == "engine":
        before.enter_context(behaviour_before())
    if mode in ("engine", "log-prior"):
        before.enter_context(swap_before())
    timing = (
        instrumented(store, events) if isinstance(store, EdgeStore) else contextlib.nullcontext()
    )
    with before, timing, gc_passes() as collections:
        if trace is not None:
            trace.start()
        tick = asyncio.create_task(ticker())
        indexing = [
            asyncio.create_task(index_at(at, done))
            for at, done in zip(args.index_at if extra else [], runs, strict=True)
        ]
        await writer()
        await asyncio.gather(*indexing)
        stop.set()
        await tick
        if trace is not None:
            trace.stop()
            print(
                f"  {mode}: the longest stalls over {args.trace:g} ms", *trace.report(), sep="\n  "
            )
        await store.close()  # after the ticker: the close's flush is not counted
    gc.unfreeze()
    runs_done = store.indexed + len(runs)
    within, durations = events.within(ticks), events.durations()
    return Found(lateness, within, durations, events.cpu, runs_done, calls, collections)


def figures(runs: list[Found]) -> tuple[dict[str, float], dict[str, str]]:
    """A mode's figures over its rounds (pooled): the stalls, and each kind's durations."""
    lateness = [x for found in runs for x in found.lateness]
    q = statistics.quantiles(lateness, n=1000)
    stalls = {
        "longest": max(lateness),
        "p99.9": q[998],
        "p99": q[989],
        "over 50": sum(1 for x in lateness if x > 50),
    }
    kinds = {}
    for kind in KINDS:
        within = [x for found in runs for x in found.within[kind]]
        took = [x for found in runs for x in found.durations[kind]]
        cpu = [x for found in runs for x in found.cpu[kind]]
        stalls[f"in {kind}"] = max(within, default=0.0)
        kinds[kind] = (
            f"{len(took)} x, {statistics.median(took):.0f} / {max(took):.0f} ms" if took else "-"
        )
        if cpu:
            kinds[kind] += f" (CPU {statistics.median(cpu):.0f} / {max(cpu):.0f})"
    stalls["index runs"] = sum(found.index_runs for found in runs)
    calls = [x for found in runs for x in found.calls]
    q = statistics.quantiles(calls, n=1000, method="inclusive")
    stalls |= {"call p50": statistics.median(calls), "call p99.9": q[998], "call max": max(calls)}
    stalls["gc max"] = max((x for found in runs for x in found.collections), default=0.0)
    return stalls, kinds


async def main_async(args: argparse.Namespace, tmp: Path) -> None:
    base = tmp / "base"
    started = time.perf_counter()
    await preload(base, args.points)
    print(f"setup: {args.points:,} points written and indexed "
          f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
    runs: dict[str, list[Found]] = {mode: [] for mode in args.mode}
    for round_ in range(args.rounds):  # modes interleaved: the machine's load falls on each
        for mode in args.mode:
            path = tmp / f"{mode}-{round_}"
            shutil.copytree(base, path)
            # As a service's shard files are when a swap comes (written at the one before and
            # flushed since); a fresh copy's dirty pages would be written back by the close.
            edge_build.sync_files(path)
            runs[mode].append(await run(path, args, mode))
            shutil.rmtree(path)
            late, gcs = runs[mode][-1].lateness, runs[mode][-1].collections
            over, gc_max, load = sum(x > 50 for x in late), max(gcs, default=0), os.getloadavg()[0]
            print(
                f"  round {round_ + 1} {mode}: longest {max(late):.1f} ms, {over} over 50 ms, "
                f"GC pass max {gc_max:.1f} ms; load {load:.1f}",
                flush=True,
            )
    results = {mode: figures(found) for mode, found in runs.items()}
    keys = list(next(iter(results.values()))[0])
    counts = ("over 50", "index runs")
    print("stalls (ms; 'in X': the longest within X)")
    print("mode | " + " | ".join(k if k in counts else f"{k} ms" for k in keys))
    for mode, (stalls, _) in results.items():
        print(f"{mode} | " + " | ".join(f"{stalls[k]:.1f}" for k in keys))
    print("storage work: count, duration p50 / max (an engine call's CPU in its thread)")
    print("mode | " + " | ".join(KINDS))
    for mode, (_, kinds) in results.items():
        print(f"{mode} | " + " | ".join(kinds[k] for k in KINDS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=20.0, help="write batches a second")
    parser.add_argument("--batch", type=int, default=5, help="points per write batch")
    parser.add_argument("--mode", nargs="+", choices=MODES, default=MODES)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each mode, interleaved")
    parser.add_argument(
        "--index-after",
        type=int,
        default=20_000,
        help="the store's index_after (an index run swaps the shard: a load and a close)",
    )
    parser.add_argument("--delete", type=int, default=0, help="ids per delete (0: none)")
    parser.add_argument("--delete-every", type=float, default=10.0, help="seconds between")
    parser.add_argument(
        "--index-at",
        type=float,
        nargs="*",
        default=[],
        help="seconds into the window to start an index run (the window waits for it)",
    )
    parser.add_argument(
        "--log-segments",
        type=int,
        default=edge_flush.LOG_SEGMENTS,
        help="closed log segments before a flush is the engine's (0: at the first)",
    )
    parser.add_argument(
        "--trace",
        type=float,
        default=0.0,
        help="print what each stall over this many ms was made of (stall_trace.py; 0: off)",
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="loop-stall-") as name:
        asyncio.run(main_async(args, Path(name)))


if __name__ == "__main__":
    main()
