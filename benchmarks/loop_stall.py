"""The longest event-loop stall under sustained writes to the edge store.

A ticker task sleeps 1 ms at a time and records how late each wake-up is: every engine call,
flush and maintenance step that holds the loop (or the GIL) shows as lateness. Beside it a
writer upserts ``--batch`` fact-like points ``--rate`` times a second (and gives as many a new
payload) into a store preloaded with ``--points`` points, for ``--seconds`` seconds. It
prints the longest stall, p99.9 and p99 of the lateness, the stalls over 50 ms, the longest
stall while a flush ran, and how long the flushes took, for each ``--mode`` side by side in
one run (each on a fresh copy of the store; ``--rounds`` runs them interleaved, pooled):

- ``log``: the store as it runs (maintenance every 5 s: the flush, which fsyncs each
  written shard's write-ahead log in a worker thread, then indexing and paging out);
- ``engine``: the behaviour before: every flush the engine's own
  (``EdgeStore(flush_engine=True)``; its binding holds the GIL for the whole flush, so the
  loop stalls for as long as it takes, in a worker thread too) and an upsert in one engine
  call however big (``edge_points.UPSERT_CHUNK`` unbounded);
- ``none``: no maintenance at all (what the writes and reads alone cost the loop).

    OMP_NUM_THREADS=1 python benchmarks/loop_stall.py --points 100000 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import numpy as np

from memory_services.store import CollectionSpec, Record, Scope, edge_points
from memory_services.store.edge import EdgeStore

MODES = ["engine", "log", "none"]
SPEC = CollectionSpec("facts-384", 384, text_fields=("content",))
SCOPE = Scope("ws", "bench", "alice")
WORDS = [
    "tortoise",
    "cello",
    "Leeds",
    "spring",
    "Fiat",
    "red",
    "sister",
    "flat",
    "code",
    "locker",
    "tea",
    "garden",
]


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
    """One run's figures: every tick's lateness, those near a flush, flush and index times."""

    lateness: list[float]
    in_flush: list[float]
    flushes: list[float]
    index_runs: int


async def run(path: Path, args: argparse.Namespace, mode: str) -> Found:
    interval = 0.0 if mode == "none" else 5.0
    store = EdgeStore(
        path,
        flush_interval=interval,
        flush_engine=mode == "engine",
        index_after=args.index_after,
    )
    flushes: list[float] = []
    windows: list[tuple[float, float]] = []
    flusher = store._flusher  # the maintenance task calls the flusher's own flush
    flush = flusher.flush

    async def timed_flush() -> None:
        started = time.perf_counter()
        await flush()
        windows.append((started, time.perf_counter()))
        flushes.append((time.perf_counter() - started) * 1000)

    flusher.flush = timed_flush  # type: ignore[method-assign]
    await store.open()
    await store.ensure(SPEC)
    lateness: list[float] = []
    ticks: list[tuple[float, float]] = []  # (slept from, late ms)
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            late = (time.perf_counter() - started - 0.001) * 1000
            lateness.append(late)
            ticks.append((started, late))

    # Made before the run: making 500 records holds the loop too, and it is not storage work.
    rng, period = np.random.default_rng(2), 1 / args.rate
    batches = [records(rng, args.batch) for _ in range(int(args.seconds * args.rate) + 1)]

    async def writer() -> None:
        ends = time.perf_counter() + args.seconds
        for batch in batches:
            if time.perf_counter() >= ends:
                break
            await store.upsert(SPEC.name, batch)
            ids = [r.id for r in batch]
            await store.set_payload(SPEC.name, ids, {"access_count": 1}, scope=SCOPE)
            await asyncio.sleep(period)

    chunk = edge_points.UPSERT_CHUNK
    if mode == "engine":
        edge_points.UPSERT_CHUNK = 1 << 30
    try:
        tick = asyncio.create_task(ticker())
        await writer()
        stop.set()
        await tick
    finally:
        edge_points.UPSERT_CHUNK = chunk
    await store.close()  # after the ticker: the close's flush is not counted
    during = [late for at, late in ticks if any(a - 0.05 <= at <= b for a, b in windows)]
    return Found(lateness, during, flushes, store.indexed)


def figures(runs: list[Found]) -> dict[str, float]:
    """A mode's figures over its rounds (pooled)."""
    lateness = [x for found in runs for x in found.lateness]
    during = [x for found in runs for x in found.in_flush]
    flushes = [x for found in runs for x in found.flushes]
    q = statistics.quantiles(lateness, n=1000)
    return {
        "longest": max(lateness),
        "p99.9": q[998],
        "p99": q[989],
        "over 50": sum(1 for x in lateness if x > 50),
        "longest in a flush": max(during, default=0.0),
        "flushes": len(flushes),
        "flush max": max(flushes, default=0.0),
        "flush p50": statistics.median(flushes) if flushes else 0.0,
        "index runs": sum(found.index_runs for found in runs),
    }


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
            runs[mode].append(await run(path, args, mode))
            shutil.rmtree(path)
            print(f"  round {round_ + 1} {mode}: done, load {os.getloadavg()[0]:.1f}", flush=True)
    results = {mode: figures(found) for mode, found in runs.items()}
    keys = list(next(iter(results.values())))
    counts = ("over 50", "flushes", "index runs")
    print("mode | " + " | ".join(k if k in counts else f"{k} ms" for k in keys))
    for mode, found in results.items():
        print(f"{mode} | " + " | ".join(f"{found[k]:.1f}" for k in keys))


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
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="loop-stall-") as name:
        asyncio.run(main_async(args, Path(name)))


if __name__ == "__main__":
    main()
