"""What a call to the edge store costs in a child process against in the service's own.

The same store (``--points`` fact-like points in one owner's scope, preloaded and indexed)
is opened in process (:class:`EdgeStore`) and hosted by a child
(:class:`~memory_services.store.hosted.HostedStore`), one at a time, rounds interleaved;
each round times ``--calls`` of each operation a retrieval and a store make (a hybrid search
with its text, a one-point upsert, a get of one id, a one-id payload update), one after
another, and prints each operation's p50 and p99 per mode, the hosted/in-process ratio of
the p50s, and the added latency (the difference of the p50s).

    OMP_NUM_THREADS=1 chrt -r 1 python benchmarks/store_hop.py --points 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from memory_services.store import CollectionSpec, Record, Scope, VectorStore
from memory_services.store.edge import EdgeStore
from memory_services.store.hosted import HostedStore

SPEC = CollectionSpec("facts-384", 384, text_fields=("content",))
SCOPE = Scope("ws", "bench", "alice")
WORDS = ["tortoise", "cello", "Leeds", "spring", "Fiat", "red", "sister", "flat", "code", "tea"]
OPS = ["search", "upsert", "get", "set_payload"]
MODES = ["in process", "hosted"]


def records(rng: np.random.Generator, count: int) -> list[Record]:
    vectors = rng.standard_normal((count, SPEC.vector_size), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        Record(
            str(uuid.uuid4()),
            SCOPE.payload() | {"content": "Alice said " + " ".join(rng.choice(WORDS, 6))},
            v.tolist(),
        )
        for v in vectors
    ]


async def preload(path: Path, points: int) -> None:
    store = EdgeStore(path, flush_interval=0, index_after=0)
    await store.open()
    await store.ensure(SPEC)
    rng = np.random.default_rng(1)
    for first in range(0, points, 1000):
        await store.upsert(SPEC.name, records(rng, min(1000, points - first)))
    await store.optimize(SPEC.name)
    await store.close()


async def timed(call: Callable[[], Awaitable[object]], out: list[float]) -> None:
    started = time.perf_counter()
    await call()
    out.append((time.perf_counter() - started) * 1000)


async def one_round(store: VectorStore, calls: int, took: dict[str, list[float]]) -> None:
    await store.open()
    await store.ensure(SPEC)
    rng = np.random.default_rng(3)
    fresh = records(rng, calls)
    first = await store.scroll(SPEC.name, scope=SCOPE, limit=1)
    known = first[0][0].id
    for i, record in enumerate(fresh):
        vector, text = list(record.vector or []), str(record.payload["content"])
        calls = {
            "search": functools.partial(
                store.search, SPEC.name, vector, scope=SCOPE, limit=10, text=text
            ),
            "upsert": functools.partial(store.upsert, SPEC.name, [record]),
            "get": functools.partial(store.get, SPEC.name, [known], scope=SCOPE),
            "set_payload": functools.partial(
                store.set_payload, SPEC.name, [record.id], {"n": i}, scope=SCOPE
            ),
        }
        for op in OPS:
            await timed(calls[op], took[op])
    await store.close()


async def main_async(args: argparse.Namespace, tmp: Path) -> None:
    base = tmp / "base"
    await preload(base, args.points)
    took = {mode: {op: [] for op in OPS} for mode in MODES}  # type: dict[str, dict[str, list[float]]]
    for round_ in range(args.rounds):
        for mode in MODES:
            path = tmp / f"{mode}-{round_}".replace(" ", "-")
            shutil.copytree(base, path)
            store: VectorStore = (
                EdgeStore(path, flush_interval=0, index_after=0)
                if mode == "in process"
                else HostedStore(path, flush_interval=0, index_after=0)
            )
            await one_round(store, args.calls, took[mode])
            shutil.rmtree(path)
        print(f"  round {round_ + 1}: load {os.getloadavg()[0]:.2f}", flush=True)
    print("op | in process p50 / p99 ms | hosted p50 / p99 ms | p50 ratio | added p50 ms")
    for op in OPS:
        cells, p50s = [], []
        for mode in MODES:
            q = statistics.quantiles(took[mode][op], n=100)
            p50s.append(statistics.median(took[mode][op]))
            cells.append(f"{p50s[-1]:.3f} / {q[98]:.3f}")
        ratio, added = p50s[1] / p50s[0], p50s[1] - p50s[0]
        print(f"{op} | {cells[0]} | {cells[1]} | {ratio:.2f}x | {added:+.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=500, help="calls of each op per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="store-hop-") as name:
        asyncio.run(main_async(args, Path(name)))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
