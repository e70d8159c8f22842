"""Vector store and embedder figures: EdgeStore filtered search p50 at 10k and 100k random
384-d points (every point in one scope, or spread over 100 scopes), the cost of a write, a
flush and a thread hop, how long a search stalls the event loop; then MiniLM latency (one
sentence) and throughput (concurrent callers batched), with 1 and 2 torch threads, idle and
next to a busy process.

    python benchmarks/vector_store.py            # everything (a few minutes on 2 cores)
    python benchmarks/vector_store.py --skip-embed --optimize
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from memory_services.store import CollectionSpec, Record, Scope
from memory_services.store.edge import EdgeStore

DIM, COLLECTION = 384, "bench-384"


def p50_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.3f} ms"


async def timed(call: Callable[[], Awaitable[object]], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


async def fill(
    store: EdgeStore, rng: np.random.Generator, start: int, stop: int, scopes: int
) -> None:
    for first in range(start, stop, 1000):
        vectors = rng.standard_normal((min(1000, stop - first), DIM), dtype=np.float32)
        await store.upsert(
            COLLECTION,
            [
                Record(
                    str(uuid.uuid4()),
                    {**Scope("ws", f"c{(first + n) % scopes}").payload(), "n": first + n},
                    vector.tolist(),
                )
                for n, vector in enumerate(vectors)
            ],
        )


async def loop_stall(call: Callable[[], Awaitable[object]]) -> float:
    """The longest gap a 1 ms ticker sees while ``call`` runs in a worker thread."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    await call()
    done = True
    await task
    return max(gaps)


async def bench_store(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    for scopes in (1, 100):
        with tempfile.TemporaryDirectory() as tmp:
            store = EdgeStore(Path(tmp), flush_interval=0)
            await store.open()
            await store.ensure(CollectionSpec(COLLECTION, DIM))
            try:
                await bench_layout(store, rng, scopes, args)
            finally:
                await store.close()


async def bench_layout(
    store: EdgeStore, rng: np.random.Generator, scopes: int, args: argparse.Namespace
) -> None:
    scope = Scope("ws", "c7" if scopes > 1 else "c0")
    query = rng.standard_normal(DIM).tolist()

    async def search() -> object:
        return await store.search(COLLECTION, query, scope=scope, limit=5)

    loaded = 0
    for size in (10_000, args.points):
        started = time.perf_counter()
        await fill(store, rng, loaded, size, scopes)
        rate = (size - loaded) / (time.perf_counter() - started)
        loaded = size
        samples = await timed(search, 30 if scopes == 1 else 200)
        print(
            f"edge search, {size:>7,} points in {scopes:>3} scope(s), "
            f"{size // scopes:>7,} in the searched one: p50 {p50_ms(samples)} "
            f"(loaded at {rate:,.0f} points/s)"
        )
    if scopes > 1:
        return
    hop = await timed(lambda: asyncio.to_thread(lambda: None), 200)
    stall = await loop_stall(lambda: asyncio.to_thread(asyncio.run, search()))
    print(
        f"thread hop p50 {p50_ms(hop)}; a search in a worker thread still "
        f"stalls the loop for {stall * 1000:.1f} ms (the binding holds the GIL)"
    )
    one = [Record(str(uuid.uuid4()), {**scope.payload()}, query)]
    upserts = await timed(lambda: store.upsert(COLLECTION, one), 100)
    flushes = await timed(lambda: _write_and_flush(store, one), 20)
    flush_stall = await loop_stall(lambda: _write_and_flush(store, one))
    print(
        f"upsert of one point p50 {p50_ms(upserts)}; upsert + flush p50 {p50_ms(flushes)}, "
        f"a flush in a worker thread stalls the loop for {flush_stall * 1000:.1f} ms"
    )
    if args.optimize:
        started = time.perf_counter()
        await store.optimize(COLLECTION)
        took = time.perf_counter() - started
        samples = await timed(search, 50)
        print(
            f"after optimize() ({took:.0f} s, GIL held): one-scope search at "
            f"{loaded:,} p50 {p50_ms(samples)}"
        )


async def _write_and_flush(store: EdgeStore, records: list[Record]) -> None:
    await store.upsert(COLLECTION, records)
    await store.flush()


async def bench_embed(threads: int, label: str) -> None:
    import torch

    from react_mem.embedding.sentence import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(torch_threads=threads)
    started = time.perf_counter()
    await embedder.start()
    load = time.perf_counter() - started
    torch.set_num_threads(threads)  # start() is once per embedder; make sure for this run
    sentences = [f"the user mentioned fact number {n} about their project" for n in range(512)]
    await embedder.embed(sentences[:8])  # warm up
    single = await timed(lambda: embedder.embed([sentences[0]]), 50)
    calls = embedder.model_calls
    started = time.perf_counter()
    await asyncio.gather(*(embedder.embed([s]) for s in sentences))
    rate = len(sentences) / (time.perf_counter() - started)
    print(
        f"embed, {threads} torch thread(s), {label}: one sentence p50 {p50_ms(single)}; "
        f"{len(sentences)} concurrent callers {rate:,.0f} texts/s in "
        f"{embedder.model_calls - calls} model calls (load {load:.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--optimize", action="store_true", help="also time optimize() (slow)")
    parser.add_argument("--skip-store", action="store_true")
    parser.add_argument("--skip-embed", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:  # one embedding run in a fresh process (torch threads are per process)
        busy = None
        if os.environ.get("BENCH_BUSY"):
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            asyncio.run(bench_embed(args.threads, "next to a busy core" if busy else "idle"))
        finally:
            if busy is not None:
                busy.kill()
        return
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )
    if not args.skip_store:
        asyncio.run(bench_store(args))
    if not args.skip_embed:
        for contended in ("", "1"):
            for threads in (1, 2):
                subprocess.run(
                    [sys.executable, __file__, "--threads", str(threads)],
                    env={**os.environ, "BENCH_BUSY": contended},
                    check=True,
                )


if __name__ == "__main__":
    main()
