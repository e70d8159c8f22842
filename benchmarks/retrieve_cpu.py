"""Fact memory's retrieve handler, CPU and wall time per search, as an ask's recall sends it.

Builds fact memory in this process on the edge store with the real embedder, holding one
LoCoMo conversation's turns (speaker and date labels, as ``locomo_recall.py`` stores them;
sentence vectors on, the default), embeds the conversation's questions once, then times
what the service does for each agent recall's request: decoding the wire request (the
question and its embedding, ``top_k`` 20 by default, the agent's retrieval options), the
retrieval, and encoding the response. Per search: the thread's CPU time
(``time.thread_time``, which a busy machine inflates little) and wall time; medians over
``--passes`` passes of the questions (after one pass of warm-up).

``--base REF`` measures a commit beside this tree: the store is built once (here), and
each side runs its passes on a copy of it in its own process, alternately (ABBA,
``--rounds``), as ``overhead_ab.py`` does; it prints each run, the medians and the ratio.
``--profile FILE`` writes the timed passes' cProfile (thread CPU time).

    OMP_NUM_THREADS=1 python benchmarks/retrieve_cpu.py
    OMP_NUM_THREADS=1 python benchmarks/retrieve_cpu.py --base main --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locomo_recall import DEFAULT_DATA, turns

from memory_services.facts import records as rec
from memory_services.facts.fact_memory import FactMemory
from memory_services.retrieval import resolve, time_boost
from memory_services.store.base import Scope
from memory_services.store.edge import EdgeStore
from react_mem.embedding.sentence import SentenceTransformerEmbedder
from react_mem.schema.facts import FactRequest, FactResponse
from react_mem.schema.retrieval import RetrievalOptions

SCOPE = Scope("bench", "locomo", "ann")
QUESTIONS = "questions.json"
FIGURE = re.compile(
    r"^per search: cpu p50 ([\d.]+) ms, wall p50 ([\d.]+) ms .*responses (\w+)$", re.M
)


class _Fixed:
    """An embedder that is never asked (every request brings its vector), of one size."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    async def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the requests bring their vectors")


async def build(root: Path, args: argparse.Namespace) -> None:
    """The store, and the questions with their embeddings beside it."""
    sample = json.loads(args.data.read_text())[args.conversation]
    facts = turns(sample)[: args.turns]
    questions = [qa["question"] for qa in sample["qa"]][: args.questions]
    embedder = SentenceTransformerEmbedder()
    await embedder.start()
    store = EdgeStore(root / "store", flush_interval=3600)
    await store.open()
    memory = FactMemory(store, embedder, policy=rec.FactPolicy(), clock=time.time)
    await memory.ensure()
    for first in range(0, len(facts), 64):
        await memory.store(SCOPE, facts[first : first + 64], sequence=True)
    vectors = await embedder.embed(questions)
    await memory.close()
    await store.close()
    held = [{"question": q, "vector": v} for q, v in zip(questions, vectors, strict=True)]
    (root / QUESTIONS).write_text(json.dumps({"dimension": embedder.dimension, "asks": held}))
    print(f"built: {len(facts)} turns, {len(questions)} questions")


async def measure(root: Path, args: argparse.Namespace) -> None:
    held = json.loads((root / QUESTIONS).read_text())
    store = EdgeStore(root / "store", flush_interval=3600)
    await store.open()
    memory = FactMemory(store, _Fixed(held["dimension"]), policy=rec.FactPolicy(), clock=time.time)  # type: ignore[arg-type]
    await memory.ensure()
    options = RetrievalOptions(mode="hybrid", fusion="rrf", dense_weight=1.0, lexical_weight=1.0)
    wire = [
        FactRequest(
            operation="retrieve",
            query=ask["question"],
            vector=ask["vector"],
            top_k=args.top_k,
            retrieval=options,
            workspace=SCOPE.workspace,
            collection=SCOPE.collection,
            user=SCOPE.user,
        ).encode()
        for ask in held["asks"]
    ]

    async def handle(data: bytes) -> bytes:
        request = FactRequest.decode(data)
        facts = await memory.retrieve(
            SCOPE,
            query=request.query,
            vector=request.vector,
            top_k=request.top_k,
            min_score=request.min_score,
            retrieval=resolve(request.retrieval),
            time_boost=time_boost(request.retrieval),
        )
        return FactResponse(facts=facts).encode()

    # What was found (ids and scores, not the access counts that move): the same at two
    # commits whose ranking is the same.
    digest = hashlib.sha256()
    for data in wire:  # warm-up
        for fact in FactResponse.decode(await handle(data)).facts:
            digest.update(f"{fact.id} {fact.score!r}\n".encode())
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(args.passes):
        for data in wire:
            if profiler is not None:
                profiler.enable()
            began, began_cpu = time.perf_counter(), time.thread_time()
            await handle(data)
            cpu.append(time.thread_time() - began_cpu)
            wall.append(time.perf_counter() - began)
            if profiler is not None:
                profiler.disable()
    if profiler is not None:
        profiler.dump_stats(args.profile)
    await memory.close()
    await store.close()
    print(
        f"per search: cpu p50 {statistics.median(cpu) * 1000:.3f} ms, "
        f"wall p50 {statistics.median(wall) * 1000:.3f} ms "
        f"({len(cpu)} searches, top_k {args.top_k}); responses {digest.hexdigest()[:16]}"
    )


def side_by_side(root: Path, args: argparse.Namespace) -> None:
    """This tree and ``--base``, alternately, each run on a fresh copy of the store."""
    here = Path(__file__).resolve().parents[1]
    base = root / "base"
    archive = subprocess.run(
        ["git", "-C", str(here), "archive", args.base], check=True, capture_output=True
    ).stdout
    base.mkdir()
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    shutil.copy(Path(__file__), base / "benchmarks" / Path(__file__).name)
    trees = {"base": base, "new": here}
    figures: dict[str, list[tuple[float, float]]] = {"base": [], "new": []}
    order = ["base", "new", "new", "base"] * args.rounds
    for n, side in enumerate(order):
        copy = root / f"run-{n}"
        shutil.copytree(root / "built", copy)
        tree = trees[side]
        command = [sys.executable, str(tree / "benchmarks" / Path(__file__).name)]
        command += ["--measure", str(copy), "--passes", str(args.passes)]
        command += ["--top-k", str(args.top_k)]
        env = os.environ | {"PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
        load = os.getloadavg()[0]
        out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
        shutil.rmtree(copy)
        found = FIGURE.search(out.stdout)
        if out.returncode != 0 or found is None:
            print(f"{side}: failed\n{out.stdout}{out.stderr[-2000:]}")
            continue
        cpu, wall = float(found[1]), float(found[2])
        figures[side].append((cpu, wall))
        print(
            f"{side:>4}: cpu p50 {cpu:.3f} ms, wall p50 {wall:.3f} ms, responses {found[3]} "
            f"(load {load:.2f})"
        )
    medians = {
        side: (statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs))
        for side, runs in figures.items()
        if runs
    }
    if len(medians) == 2:
        (bc, bw), (nc, nw) = medians["base"], medians["new"]
        print(f"median cpu per search: base {bc:.3f} ms, new {nc:.3f} ms, new/base {nc / bc:.2f}")
        print(f"median wall per search: base {bw:.3f} ms, new {nw:.3f} ms, new/base {nw / bw:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--top-k", type=int, default=20, help="the agent's fact-retrieval-top-k")
    parser.add_argument("--passes", type=int, default=5, help="timed passes over the questions")
    parser.add_argument("--base", default=None, help="a git ref to measure beside this tree")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds with --base")
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    parser.add_argument(
        "--store", type=Path, default=None, help="build the store here, or reuse the one there"
    )
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        asyncio.run(measure(args.measure, args))
        return
    reuse = args.store is not None and (args.store / QUESTIONS).is_file()
    if not reuse and not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to measure")
        return
    with tempfile.TemporaryDirectory(prefix="retrieve-cpu-") as tmp:
        root = Path(tmp)
        if reuse:
            shutil.copytree(args.store, root / "built")
        else:
            (root / "built").mkdir()
            asyncio.run(build(root / "built", args))
            if args.store is not None:
                shutil.copytree(root / "built", args.store)
        if args.base is None:
            asyncio.run(measure(root / "built", args))
        else:
            side_by_side(root, args)


if __name__ == "__main__":
    main()
