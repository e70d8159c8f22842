"""What the retry policy costs a store call that succeeds: the edge store called plainly,
through a call site's own retry helper (how the memory modules called it before the
policy moved to the seam), and through :class:`~memory_services.retry.RetryingStore` (how
they call it now), interleaved round by round in one run; medians per call and the
ratios to the plain call. First on a store that answers at once (the path's own cost),
then on the edge store.

    python benchmarks/store_retry.py                  # 2,000 points, 15 rounds
    python benchmarks/store_retry.py --points 500 --rounds 5 --calls 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import numpy as np

from memory_services.retry import STORE, RetryingStore, _retried
from memory_services.store import CollectionSpec, Hit, Record, Scope, VectorStore
from memory_services.store.edge import EdgeStore

DIM, COLLECTION = 384, "bench-384"
SCOPE = Scope("ws", "c0", "u0")
Call = Callable[[], Awaitable[object]]


async def per_call(call: Call, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - started) / n


def calls(target: VectorStore, ids: list[str], vector: list[float]) -> dict[str, Call]:
    """One store call of each kind on ``target``."""
    return {
        "get 1": lambda: target.get(COLLECTION, ids[:1], scope=SCOPE),
        "count": lambda: target.count(COLLECTION, scope=SCOPE),
        "search 5": lambda: target.search(COLLECTION, vector, scope=SCOPE, limit=5),
    }


class NoopStore:
    """Answers at once: what is left of a call's time is the path to the store."""

    async def get(self, *args: object, **kwargs: object) -> list[Record]:
        return []

    async def count(self, *args: object, **kwargs: object) -> int:
        return 0

    async def search(self, *args: object, **kwargs: object) -> list[Hit]:
        return []


async def compare(
    title: str, store: VectorStore, ids: list[str], vector: list[float], args: argparse.Namespace
) -> None:
    plain = calls(store, ids, vector)
    wrappers = {
        "plain": plain,
        "call-site helper (before)": {
            name: (lambda c=c: _retried(STORE, c)) for name, c in plain.items()
        },
        "seam wrapper (after)": calls(RetryingStore(store), ids, vector),
    }
    samples: dict[tuple[str, str], list[float]] = {}
    variants = list(wrappers)
    for round in range(args.rounds):  # interleaved, each round in a rotated order, so
        turn = variants[round % 3 :] + variants[: round % 3]  # drifts hit all alike
        for name in plain:
            for variant in turn:
                seconds = await per_call(wrappers[variant][name], args.calls)
                samples.setdefault((variant, name), []).append(seconds)
    print(f"{title:<18} " + " ".join(f"{v:>28}" for v in wrappers))
    for name in plain:
        base = statistics.median(samples[("plain", name)])
        cells = []
        for variant in wrappers:
            median = statistics.median(samples[(variant, name)])
            cells.append(f"{median * 1e6:8.2f} µs ({median / base:5.3f}x)")
        print(f"  {name:<16} " + " ".join(f"{c:>28}" for c in cells))


async def run(args: argparse.Namespace, root: Path) -> None:
    await compare("no-op store", cast(VectorStore, NoopStore()), ["x"], [0.0], args)
    store = EdgeStore(root, flush_interval=0)
    await store.open()
    try:
        await store.ensure(CollectionSpec(COLLECTION, DIM))
        rng = np.random.default_rng(7)
        vectors = rng.standard_normal((args.points, DIM), dtype=np.float32)
        ids = [str(uuid.uuid4()) for _ in range(args.points)]
        records = [
            Record(i, SCOPE.payload(), v.tolist()) for i, v in zip(ids, vectors, strict=True)
        ]
        for first in range(0, args.points, 500):
            await store.upsert(COLLECTION, records[first : first + 500])
        await compare("edge store", store, ids, vectors[0].tolist(), args)
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000, help="records in the one scope")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=300, help="calls per variant and round")
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"edge store, {DIM}-d; settings: {vars(args)}"
    )
    with tempfile.TemporaryDirectory(prefix="store-retry-") as name:
        asyncio.run(run(args, Path(name)))


if __name__ == "__main__":
    main()
