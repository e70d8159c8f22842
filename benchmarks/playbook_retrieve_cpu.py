"""playbook-memory's retrieve handler, CPU and wall time per call, as an ask's recall sends it.

Builds playbook memory in this process on the edge store with the real embedder: the
collection-wide playbook with its seed bullets and ``--shared`` lessons more, and one user's
own playbook with ``--bullets`` lessons, written as the learner writes them (ADDs with the
user, ``helpful`` 1, a section, which the service makes the topic, tags, the lesson's memory
type; one in four names a topic of its own, which the questions may name, as the topic
boost reads; near-duplicates merged as the service merges them, so a playbook may hold
fewer). The questions (the agent benchmark's wordings) are embedded once. Then it times
what the service does for each agent recall's request: the request's handler as the
processor runs it (the audit and admission wrappers, the access checks, the retrieval over
the user's own and the collection-wide playbook, the clocks' advance, the response's
encoding), from the wire request (the question, its embedding, ``top_k`` 8, the agent's
defaults) to the encoded reply. Per call: the thread's CPU time (``time.thread_time``,
which a busy machine inflates little) and wall time; medians over ``--passes`` passes of
the questions (after one pass of warm-up).

The digest is of the warm-up pass's replies, one per question: each reply's bullets (every
field but ``last_used``, a wall-clock time: ids, order, scores, access indexes), version and
clock. Two commits whose retrieve answers the same give the same digest. It also prints
the agent's side: its client's decoding of a reply (CPU, median).

``--base REF`` measures a commit beside this tree: the store is built once (here), and each
side runs its passes on a copy of it in its own process, alternately (ABBA, ``--rounds``);
it prints each run, the medians and the ratio. ``--profile FILE`` writes the timed passes'
cProfile (thread CPU time).

    OMP_NUM_THREADS=1 python benchmarks/playbook_retrieve_cpu.py
    OMP_NUM_THREADS=1 python benchmarks/playbook_retrieve_cpu.py --bullets 1 --shared 0
    OMP_NUM_THREADS=1 python benchmarks/playbook_retrieve_cpu.py --base main --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry

from memory_services.playbook import seeds
from memory_services.playbook.playbook_memory import PlaybookMemory
from memory_services.playbook.records import PlaybookPolicy, ScopeKey
from memory_services.playbook.service import PlaybookMemoryProcessor
from memory_services.processor import Opened
from memory_services.retry import retrying_store
from memory_services.store.edge import EdgeStore
from react_mem.embedding.sentence import SentenceTransformerEmbedder
from react_mem.processor.context import MessageContext
from react_mem.schema.playbook import Delta, DeltaOperation, PlaybookRequest, PlaybookResponse

WORKSPACE, COLLECTION, USER = "bench", "default", "user-1"
QUESTIONS = "questions.json"
FIGURE = re.compile(
    r"^per retrieve: cpu p50 ([\d.]+) ms, wall p50 ([\d.]+) ms .*responses (\w+)$", re.M
)
# fmt: off
#: The agent benchmark's questions (``agent_load.question``) and lesson-like advice.
SUBJECTS = ("sister", "brother", "manager", "neighbour", "dentist", "landlord", "coach", "aunt")
CITIES = ("Lisbon", "Osaka", "Quito", "Tallinn", "Accra", "Hobart", "Bergen", "Cusco")
THINGS = ("a weekend trip", "a birthday dinner", "a move", "a budget", "a study plan",
          "a garden", "a wedding toast", "a job interview")
DOMAINS = ("invoices", "flight bookings", "SQL reports", "unit conversions", "legal clauses",
           "medical dosages", "board game rules", "tax forms", "shipping labels", "API errors",
           "spreadsheet formulas", "recipes", "timetables", "insurance claims", "git merges",
           "chemistry units", "payroll", "exam grading", "map directions", "log files",
           "trip planning", "dinner bookings", "moving house", "budgets", "study plans")
ADVICE = ("double-check every total", "quote the source line", "state the assumption made",
          "ask which version applies", "convert to one unit before comparing",
          "list the constraints before answering", "prefer the newest document",
          "show the intermediate steps", "round only at the end", "name the rule being applied",
          "keep the original wording of names", "check for missing fields",
          "sort the entries by date", "flag values outside the normal range",
          "give the answer in the requested format", "cite the section number",
          "repeat the question's key figures", "mention what could not be verified")
SECTIONS = ("Answering", "Reading the task", "Using memory", "Using tools", "Planning")
LESSON_TYPES = (("strategy", "procedural"), ("insight", "semantic"), ("mistake", "episodic"))
# fmt: on


def questions(n: int) -> list[str]:
    asked = []
    for i in range(n):
        who, city = SUBJECTS[i % len(SUBJECTS)], CITIES[(i * 3) % len(CITIES)]
        if i % 4 == 0:
            asked.append(f"Please remember that my {who} lives in {city} (note 0-{i}).")
        else:
            asked.append(f"Can you help me plan {THINGS[i % len(THINGS)]} with my {who} in {city}?")
    return asked


def lessons(n: int, user: str | None, rng: random.Random) -> list[DeltaOperation]:
    """``n`` distinct lessons as the learner's curator adds them."""
    made: dict[str, DeltaOperation] = {}
    while len(made) < n:
        domain, advice = rng.choice(DOMAINS), rng.choice(ADVICE)
        city = rng.choice(CITIES)
        content = f"For {domain} in {city}, {advice}."
        kind, memory_type = rng.choice(LESSON_TYPES)
        topical = len(made) % 4 == 0  # some lessons name a topic (the topic boost's)
        made[content] = DeltaOperation(
            type="ADD",
            content=content,
            section=rng.choice(SECTIONS),
            tags=[domain.split()[0].lower(), kind],
            memory_type=memory_type,  # type: ignore[arg-type]
            topic=domain if topical else None,
            user=user,
            helpful=1,
            metadata={"lesson-type": kind, "learned-from": "trajectory"},
        )
    return list(made.values())


async def build(root: Path, args: argparse.Namespace) -> None:
    """The store, and the questions with their embeddings beside it."""
    embedder = SentenceTransformerEmbedder()
    await embedder.start()
    store = EdgeStore(root / "store", flush_interval=3600)
    await store.open()
    memory = PlaybookMemory(
        store,
        embedder,
        policy=PlaybookPolicy(),
        rates=PlaybookMemoryProcessor.Settings.load({"id": "bench"}).rates(),  # type: ignore[attr-defined]
        clock=time.time,
        seed_operations=seeds.load(seeds.DEFAULT),
    )
    await memory.ensure()
    rng = random.Random(7)
    base = ScopeKey(WORKSPACE, COLLECTION)
    held = {}
    for key, count, user in ((base, args.shared, None), (base.of(USER), args.bullets, USER)):
        adds = lessons(count, user, rng)
        for n, first in enumerate(range(0, len(adds), 25)):
            delta = Delta(delta_id=f"build-{user}-{n}", operations=adds[first : first + 25])
            await memory.apply(key, delta, user=user)
        async with memory.open(key) as pb:
            held[key.owner or "collection"] = len(pb.bullets)
    asked = questions(args.questions)
    vectors = await embedder.embed(asked)
    await store.close()
    rows = [{"question": q, "vector": v} for q, v in zip(asked, vectors, strict=True)]
    (root / QUESTIONS).write_text(json.dumps({"dimension": embedder.dimension, "asks": rows}))
    print(f"built: bullets {held}, {len(asked)} questions")


class _Fixed:
    """An embedder that is never asked (every request brings its vector), of one size."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    async def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the requests bring their vectors")


class _Flow:
    """What a handler's context reaches of its flow: the workspace and the reply's send
    (here, the reply's encoding, kept for the digest)."""

    def __init__(self) -> None:
        self.workspace = WORKSPACE
        self.sent: list[bytes] = []

    async def send(self, queue: str, message: Any, *, id: str | None = None) -> None:
        self.sent.append(message.encode())


async def measure(root: Path, args: argparse.Namespace) -> None:
    held = json.loads((root / QUESTIONS).read_text())
    edge = EdgeStore(root / "store", flush_interval=3600)
    await edge.open()
    store = retrying_store(edge)  # as the processor wraps its store
    settings = PlaybookMemoryProcessor.Settings.load(
        {"id": "playbook-memory", "data_dir": root / "store", "metrics": False}
    )
    fixed = _Fixed(held["dimension"])
    processor = PlaybookMemoryProcessor(
        settings,
        None,  # type: ignore[arg-type]  # no bus: the handler is called directly
        registry=CollectorRegistry(),
        store=store,
        embedder=fixed,  # type: ignore[arg-type]
    )
    memory = await processor.open_memory(store, fixed)  # type: ignore[arg-type]
    processor.started.open(Opened(store, memory))
    [handler] = [s.handler for s in processor.specifications if getattr(s, "handler", None)]
    wire = [
        PlaybookRequest(
            operation="retrieve",
            collection=COLLECTION,
            user=USER,
            query=ask["question"],
            vector=ask["vector"],
            top_k=args.top_k,
            relevance="embedding",
            weights="default",
        ).encode()
        for ask in held["asks"]
    ]
    flow = _Flow()

    async def handle(data: bytes) -> None:
        ctx = MessageContext(flow=flow, id="r", response="response")  # type: ignore[arg-type]
        await handler(PlaybookRequest.decode(data), ctx)

    digest = hashlib.sha256()
    decoding: list[float] = []  # the agent's side: its client's decoding of each reply
    for data in wire:  # warm-up (the clocks move: each side starts from the same store)
        await handle(data)
        sent = flow.sent.pop()
        began_cpu = time.thread_time()
        reply = PlaybookResponse.decode(sent)
        decoding.append(time.thread_time() - began_cpu)
        assert reply.error is None, reply.error
        digest.update(f"{reply.version} {reply.clock}\n".encode())
        for b in reply.bullets:
            digest.update(json.dumps(b.model_dump(exclude={"last_used"}), sort_keys=True).encode())
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
            flow.sent.clear()
    if profiler is not None:
        profiler.dump_stats(args.profile)
    await store.close()
    print(
        f"per retrieve: cpu p50 {statistics.median(cpu) * 1000:.3f} ms, "
        f"wall p50 {statistics.median(wall) * 1000:.3f} ms "
        f"({len(cpu)} retrieves, top_k {args.top_k}); responses {digest.hexdigest()[:16]}"
    )
    print(f"the client's decoding of a reply: cpu p50 {statistics.median(decoding) * 1000:.3f} ms")


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
        print(f"median cpu per retrieve: base {bc:.3f} ms, new {nc:.3f} ms, new/base {nc / bc:.2f}")
        print(
            f"median wall per retrieve: base {bw:.3f} ms, new {nw:.3f} ms, new/base {nw / bw:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bullets", type=int, default=100, help="lessons in the user's playbook")
    parser.add_argument(
        "--shared", type=int, default=94, help="lessons in the collection-wide one (and seeds)"
    )
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--top-k", type=int, default=8, help="the agent's playbook-top-k")
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
    with tempfile.TemporaryDirectory(prefix="playbook-retrieve-cpu-") as tmp:
        root = Path(tmp)
        if reuse:
            shutil.copytree(args.store, root / "built")
        else:
            (root / "built").mkdir()
            asyncio.run(build(root / "built", args))
            if args.store is not None:
                shutil.copytree(root / "built", args.store)
        if args.base is None:
            copy = root / "run"
            shutil.copytree(root / "built", copy)
            asyncio.run(measure(copy, args))
        else:
            side_by_side(root, args)


if __name__ == "__main__":
    main()
