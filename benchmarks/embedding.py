"""The embedding backends side by side: torch, the ONNX export (fp32) and its int8 weights.

For each backend, through :class:`SentenceTransformerEmbedder` on one inference thread (the
services' default): the latency of one short query (median and p90), texts per second for
fact-sized texts sent 64 per call, and each vector's cosine to torch's over the same texts.
Backends run in turn within one process, in repeated rounds, so machine noise lands on all of
them alike. Texts: ``fact_memory.py``'s (LoCoMo turns and questions when
``../shared/eval/locomo-dev.json`` is present, then generated ones).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import get_args

import numpy as np
from fact_memory import corpus, questions

from react_mem.embedding.base import EmbeddingBackend
from react_mem.embedding.sentence import SentenceTransformerEmbedder


async def measure(
    embedder: SentenceTransformerEmbedder, facts: list[str], asked: list[str]
) -> tuple[list[float], float]:
    latencies = []
    for query in asked:
        started = time.perf_counter()
        await embedder.embed([query])
        latencies.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    for first in range(0, len(facts), 64):
        await embedder.embed(facts[first : first + 64])
    return latencies, len(facts) / (time.perf_counter() - started)


async def run(args: argparse.Namespace) -> None:
    facts, asked = corpus(args.texts), questions(args.texts)
    backends: tuple[EmbeddingBackend, ...] = get_args(EmbeddingBackend)
    embedders = {}
    for backend in backends:
        embedder = SentenceTransformerEmbedder(backend=backend, torch_threads=args.threads)
        started = time.perf_counter()
        await embedder.start()
        print(f"{backend}: started in {time.perf_counter() - started:.1f} s")
        embedders[backend] = embedder
    latencies: dict[str, list[float]] = {b: [] for b in backends}
    rates: dict[str, list[float]] = {b: [] for b in backends}
    for _ in range(args.rounds):
        for backend, embedder in embedders.items():
            lat, rate = await measure(embedder, facts, asked)
            latencies[backend] += lat[5:]  # the first calls warm caches
            rates[backend].append(rate)
    reference = np.asarray(await embedders["torch"].embed(facts + asked))
    print(f"\n{len(asked)} queries and {len(facts)} facts per round, {args.rounds} rounds, "
          f"{args.threads} thread(s), load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    base_latency = statistics.median(latencies["torch"])
    base_rate = statistics.median(rates["torch"])
    for backend, embedder in embedders.items():
        vectors = np.asarray(await embedder.embed(facts + asked))
        cosines = (vectors * reference).sum(axis=1)
        q = statistics.quantiles(latencies[backend], n=10)
        rate = statistics.median(rates[backend])
        print(f"{backend:>9}: query p50 {statistics.median(latencies[backend]):5.2f} ms "
              f"(p90 {q[8]:5.2f}; {base_latency / statistics.median(latencies[backend]):.1f}x "
              f"torch), batched {rate:4.0f} texts/s ({rate / base_rate:.1f}x torch), "
              f"cosine to torch mean {cosines.mean():.4f} min {cosines.min():.4f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256, help="facts and queries per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
