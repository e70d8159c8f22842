"""Search latency of the edge store while it builds an HNSW index, against idle.

A client searches one scope of ``--points`` unindexed 384-d points on a fixed schedule
(``--rate`` a second) and writes ``--writes`` points a second beside it; latency counts from
each search's scheduled time, so a stalled loop shows in every search it delays. It prints
p50/p99/max idle, then during one indexing run done two ways: the old way (the engine's
``optimize()`` on the live shard in a worker thread, which holds the GIL) and the store's
(``EdgeStore.optimize()``: a child process builds an indexed copy that is swapped in).

    OMP_NUM_THREADS=1 python benchmarks/index_stall.py --points 40000
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from memory_services.store import CollectionSpec, Record, Scope
from memory_services.store.edge import EdgeStore

SPEC = CollectionSpec("bench-384", 384)
SCOPE = Scope("ws", "bench")


def records(rng: np.random.Generator, count: int) -> list[Record]:
    vectors = rng.standard_normal((count, SPEC.vector_size), dtype=np.float32)
    return [Record(str(uuid.uuid4()), SCOPE.payload(), v.tolist()) for v in vectors]


async def load(store: EdgeStore, rng: np.random.Generator, points: int) -> list[list[float]]:
    queries = []
    for first in range(0, points, 1000):
        batch = records(rng, min(1000, points - first))
        await store.upsert(SPEC.name, batch)
        queries.append(list(batch[0].vector or []))
    return queries


async def measure(
    store: EdgeStore,
    queries: list[list[float]],
    args: argparse.Namespace,
    during: Callable[[], Awaitable[object]] | None,
) -> tuple[list[float], float, float, int]:
    """Latencies (s) of scheduled searches while ``during`` runs (or for ``--idle`` s), the
    longest stall of the loop, the run's seconds and the points written meanwhile."""
    rng, latencies, written = np.random.default_rng(3), [], 0
    started = time.perf_counter()
    period, n, ended = 1 / args.rate, 0, started + args.idle
    task = asyncio.ensure_future(during()) if during else None
    if task is not None:  # the searches due before the run ended count, late or not
        ended = float("inf")
        task.add_done_callback(lambda _: set_end(time.perf_counter()))

    def set_end(when: float) -> None:
        nonlocal ended
        ended = when

    gaps = asyncio.create_task(longest_gap(lambda: due >= ended))
    due = started
    while (due := started + n * period) < ended:
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        hits = await store.search(SPEC.name, queries[n % len(queries)], scope=SCOPE, limit=5)
        assert hits, "a search found nothing"
        latencies.append(time.perf_counter() - due)
        if args.writes and n % max(1, round(args.rate / args.writes)) == 0:
            await store.upsert(SPEC.name, records(rng, 1))
            written += 1
        n += 1
    if task is not None:
        await task
    return latencies, await gaps, time.perf_counter() - started, written


async def longest_gap(stop: Callable[[], bool]) -> float:
    """The longest the event loop went without running this 5 ms ticker (its stall)."""
    longest, last = 0.0, time.perf_counter()
    while not stop():
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    return longest


def line(label: str, samples: list[float], stall: float) -> str:
    q = statistics.quantiles(samples, n=100)
    return (f"{label}: search p50 {q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms, "
            f"max {max(samples) * 1000:.0f} ms over {len(samples)} searches; longest loop "
            f"stall {stall * 1000:.0f} ms")  # fmt: skip


async def run(args: argparse.Namespace, tmp: Path) -> None:
    for way in ("in-process optimize() (old)", "child-process build + swap (EdgeStore)"):
        store = EdgeStore(tmp / way.split()[0], flush_interval=5, index_after=0)
        await store.open()
        await store.ensure(SPEC)
        try:
            queries = await load(store, np.random.default_rng(7), args.points)
            await store.flush()
            idle, stall, _, _ = await measure(store, queries, args, None)
            print(f"  {line('idle', idle, stall)}")
            build: Callable[[], Awaitable[object]] = functools.partial(store.optimize, SPEC.name)
            if way.endswith("(old)"):
                build = functools.partial(asyncio.to_thread, store._shards[SPEC.name].optimize)
            busy, stall, seconds, written = await measure(store, queries, args, build)
            info = store._shards[SPEC.name].info()
            print(f"  {line(f'indexing, {way}', busy, stall)}; the run took {seconds:.1f} s, "
                  f"{written} point(s) written meanwhile; {info.indexed_vectors_count:,} of "
                  f"{info.points_count:,} points indexed after it")  # fmt: skip
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=40_000)
    parser.add_argument("--rate", type=float, default=20, help="searches per second")
    parser.add_argument("--writes", type=float, default=5, help="points written per second")
    parser.add_argument("--idle", type=float, default=5, help="seconds measured idle")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{args.points:,} unindexed 384-d points in one scope; {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="index-stall-") as name:
        asyncio.run(run(args, Path(name)))


if __name__ == "__main__":
    main()
