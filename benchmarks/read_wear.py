"""Fact retrieval over time in a store that only serves reads: does reading wear the index?

A retrieval updates its facts' access statistics. Written into the records (as before the
side table), each is a payload change, and the engine moves a point given a new payload out
of its HNSW segment into the segment searches scan, so reads alone slowed retrieval (at 100k
facts: p50 1.9 ms fresh, 21 ms after 20k retrievals). Two copies of one optimised store of
``--facts`` facts (the layout of ``fact_memory.py``), both with the store's default
re-indexing, take the same retrievals in rounds of ``--per-round``, each query a stored
fact's vector, so the facts read spread over the store: ``side table`` is the service as it
is (statistics in :mod:`memory_services.facts.access_table`); ``in the record`` replays the
old write path (each round's statistics written into the records, coalesced, as the old
write-behind did). Before each round it prints retrieval p50/p90 of the same probe queries
in each copy (in process: no bus, no query embedding), the index runs so far, and at the
end each copy's p50 after the last round over its fresh p50. After each round both stores
are left idle for ``--idle`` seconds, as a service between bursts.

    OMP_NUM_THREADS=1 python benchmarks/read_wear.py --facts 100000 --rounds 5 --per-round 10000
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

from memory_services.facts import records as rec
from memory_services.facts.access_overlay import owner_key
from memory_services.facts.fact_memory import FactMemory
from memory_services.store.base import Record, Scope
from memory_services.store.edge import EdgeStore

#: The copies compared: a name and whether the statistics are written into the records.
VARIANTS = {"side table": False, "in the record (before)": True}


class _Dimension:
    """Stands in for the embedder (queries come as vectors, setup writes records)."""

    model_name, dimension = "all-MiniLM-L6-v2", 384

    async def start(self) -> None: ...

    async def embed(self, texts: object) -> list[list[float]]:
        raise AssertionError("never embeds")


def scopes(count: int) -> list[Scope]:
    return [Scope("default", "bench")]


async def synthetic(path: Path, count: int) -> np.ndarray:
    """``count`` numbered facts with random unit vectors, written and optimised (no model, no
    evaluation data: the layout of the service's records); their vectors."""
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((count, 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = EdgeStore(path, flush_interval=0, index_after=0)
    await store.open()
    memory = FactMemory(store, _Dimension(), policy=rec.FactPolicy(), clock=time.time)
    await memory.ensure()
    [scope], now = scopes(1), time.time()
    await memory.ctx.scopes.remember(scope)
    for first in range(0, count, 1000):
        records = []
        for i in range(first, min(count, first + 1000)):
            text = f"Fact number {i}: someone said something about item {i % 977}."
            normalised = rec.normalise(text)
            payload = rec.new_payload(
                scope, content=text, normalised=normalised, now=now, importance=0.5,
                confidence=0.7, expires_at=rec.NEVER, metadata={}, source_conversation=None,
                request_id=None,
            )  # fmt: skip
            records.append(Record(rec.fact_id(scope, normalised), payload, vectors[i].tolist()))
        await memory.ctx.upsert(records)
    await memory.close()
    await store.optimize(memory.ctx.collection)
    await store.close()
    return vectors


async def retrieve(
    store: EdgeStore, memory: FactMemory, queries: np.ndarray, in_record: bool
) -> list[float]:
    """Milliseconds of each retrieval of the scope (top 5), access statistics written after
    (to the side table; ``in_record``: into the records, as before it)."""
    [scope] = scopes(1)
    took, seen = [], {}
    for vector in queries:
        started = time.perf_counter()
        facts = await memory.retrieve(scope, vector=vector.tolist(), top_k=5)
        took.append((time.perf_counter() - started) * 1000)
        seen.update({f.id: (f.last_accessed, f.access_count) for f in facts})
    await memory.flush_access()
    if in_record:  # the old write-behind: one set_payload per distinct (time, count)
        groups: dict[tuple[float | None, int], list[str]] = {}
        for id, stats in seen.items():
            groups.setdefault(stats, []).append(id)
        for (last, count), ids in groups.items():
            fields = {"last_accessed": last, "access_count": count}
            await store.set_payload(memory.ctx.collection, ids, fields, scope=scope)
            memory.access.drop(owner_key(scope), ids)  # now in the records
    return took


async def run(args: argparse.Namespace, tmp: Path) -> None:
    base = tmp / "base"
    if args.synthetic:
        vectors = await synthetic(base, args.facts)
    else:
        from fact_memory import corpus, embed_all, optimize, preload

        texts = corpus(args.facts)
        vectors = await embed_all(texts)
        await preload(base, scopes(1), texts, vectors)
        await optimize(base)
    print(f"setup: {len(vectors):,} facts written and optimised", flush=True)
    rng = np.random.default_rng(3)
    probes = vectors[rng.choice(len(vectors), args.probes, replace=False)]
    copies: list[tuple[EdgeStore, FactMemory, bool]] = []
    chosen = {name: VARIANTS[name] for name in args.variants}
    for name, in_record in chosen.items():
        path = tmp / name.replace(" ", "-").replace("(", "").replace(")", "")
        shutil.copytree(base, path)
        store = EdgeStore(path)
        await store.open()
        memory = FactMemory(
            store, _Dimension(), policy=rec.FactPolicy(), clock=time.time, access_delay=0.2
        )
        await memory.ensure()
        copies.append((store, memory, in_record))
    print("retrievals | " + " | ".join(f"{n}: p50 / p90 ms, index runs" for n in chosen))
    order = random.Random(5)
    medians: list[list[float]] = [[] for _ in copies]
    for round_ in range(args.rounds + 1):
        cells = []
        for n, (store, memory, in_record) in enumerate(copies):
            took = await retrieve(store, memory, probes, in_record)
            q = statistics.quantiles(took, n=10)
            medians[n].append(statistics.median(took))
            cells.append(f"{statistics.median(took):.2f} / {q[8]:.2f}, {store.indexed}")
        print(f"{round_ * args.per_round:>10,} | " + " | ".join(cells), flush=True)
        if round_ == args.rounds:
            break
        picks = [order.randrange(len(vectors)) for _ in range(args.per_round)]
        for store, memory, in_record in copies:
            for start in range(0, len(picks), 1000):  # written behind every 1,000
                await retrieve(store, memory, vectors[picks[start : start + 1000]], in_record)
        await asyncio.sleep(args.idle)
    print("p50 after / fresh | " + " | ".join(
        f"{name}: {m[-1] / m[0]:.2f}x" for name, m in zip(chosen, medians, strict=True)
    ))  # fmt: skip
    for store, memory, _ in copies:
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
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="random unit vectors and numbered facts (no model or evaluation data needed)",
    )
    parser.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS), metavar="NAME"
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="read-wear-") as name:
        asyncio.run(run(args, Path(name)))


if __name__ == "__main__":
    main()
