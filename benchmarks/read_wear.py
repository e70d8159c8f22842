"""Fact retrieval over time in a store that only serves reads, re-indexed or not.

Every retrieval writes its facts' access statistics a moment later, and the engine moves a
point given a new payload out of its HNSW segment into the segment searches scan. Two copies
of one optimised store of ``--facts`` facts (the layout of ``fact_memory.py``) take the same
retrievals in rounds of ``--per-round``, each query a stored fact's vector, so the facts read
spread over the store: one copy with the store's default ``index_after`` (points moved count
towards the next index run), one with indexing off (what the engine's own count gave: it never
saw the moved points). Before each round it prints retrieval p50/p90 of the same probe queries
in each copy (in process: no bus, no query embedding) and the index runs so far; after each
round both stores are left idle for ``--idle`` seconds, as a service between bursts.

    OMP_NUM_THREADS=1 python benchmarks/read_wear.py --facts 100000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from fact_memory import _Dimension, corpus, embed_all, optimize, preload, scopes

from memory_services.facts import records as rec
from memory_services.facts.memory import FactMemory
from memory_services.store.edge import EdgeStore

#: The copies compared: a name and the store's ``index_after``.
VARIANTS = {"re-indexed": 20_000, "never re-indexed": 0}


async def retrieve(memory: FactMemory, queries: np.ndarray) -> list[float]:
    """Milliseconds of each retrieval of the scope (top 5), access statistics written after."""
    [scope] = scopes(1)
    took = []
    for vector in queries:
        started = time.perf_counter()
        await memory.retrieve(scope, vector=vector.tolist(), top_k=5)
        took.append((time.perf_counter() - started) * 1000)
    await memory.flush_access()
    return took


async def run(args: argparse.Namespace, tmp: Path) -> None:
    texts = corpus(args.facts)
    vectors = await embed_all(texts)
    base = tmp / "base"
    print(f"setup: {len(texts):,} facts written and optimised", flush=True)
    await preload(base, scopes(1), texts, vectors)
    await optimize(base)
    rng = np.random.default_rng(3)
    probes = vectors[rng.choice(len(vectors), args.probes, replace=False)]
    copies: list[tuple[EdgeStore, FactMemory]] = []
    for name, index_after in VARIANTS.items():
        path = tmp / name.replace(" ", "-")
        shutil.copytree(base, path)
        store = EdgeStore(path, index_after=index_after)
        await store.open()
        memory = FactMemory(
            store, _Dimension(), policy=rec.FactPolicy(), clock=time.time, access_delay=0.2
        )
        await memory.ensure()
        copies.append((store, memory))
    print("retrievals | " + " | ".join(f"{n}: p50 / p90 ms, index runs" for n in VARIANTS))
    order = random.Random(5)
    for round_ in range(args.rounds + 1):
        cells = []
        for store, memory in copies:
            took = await retrieve(memory, probes)
            q = statistics.quantiles(took, n=10)
            cells.append(f"{statistics.median(took):.2f} / {q[8]:.2f}, {store.indexed}")
        print(f"{round_ * args.per_round:>10,} | " + " | ".join(cells), flush=True)
        if round_ == args.rounds:
            break
        picks = [order.randrange(len(vectors)) for _ in range(args.per_round)]
        for _, memory in copies:
            await retrieve(memory, vectors[picks])
        await asyncio.sleep(args.idle)
    for store, memory in copies:
        await memory.close()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=4_000, help="retrievals per round")
    parser.add_argument("--probes", type=int, default=300, help="timed retrievals per round")
    parser.add_argument(
        "--idle", type=float, default=6.0, help="seconds idle after a round (a tick every 5)"
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="read-wear-") as name:
        asyncio.run(run(args, Path(name)))


if __name__ == "__main__":
    main()
