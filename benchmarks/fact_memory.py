"""Fact memory at 1k, 10k and 100k facts in one scope, and 100k spread over 100 scopes.

The service runs in its own OS process (``python -m react_mem.cli run
memory_services.facts.service.FactMemoryProcessor``) on an embedded broker; this process is
the client. Most facts are written straight into the edge store first (setup speed), with
the service's record layout, indexed as the service's store indexes while it grows (the
stalls are printed). Then, as grown and again after a full offline ``EdgeStore.optimize()``,
it prints batched ingest through the bus
(``--sample`` more facts in batches of ``--batch``, near-duplicate checks included) and
retrieval latency through the bus (query embedding included); and the service's RSS.
Fact texts are LoCoMo dialogue turns when ``../shared/eval/locomo-dev.json`` is present
(read at run time), then generated two-clause facts about people.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memory_services.facts import records as rec
from memory_services.facts.fact_memory import FactMemory
from memory_services.store.base import Record, Scope
from memory_services.store.edge import EdgeStore
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.facts import FactClient
from react_mem.embedding.base import DEFAULT_BACKEND
from react_mem.embedding.sentence import SentenceTransformerEmbedder
from react_mem.errors import RequestTimeout
from react_mem.schema.facts import FactInput, FactResponse
from react_mem.schema.retrieval import RetrievalMode, RetrievalOptions

Client = FactClient
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo-dev.json"
CACHE = Path(tempfile.gettempdir()) / "fact-memory-bench"
TARGET_P50_MS, TARGET_P99_MS, TARGET_INGEST = 15.0, 40.0, 150.0
WORKSPACE, FLOW, PID = "default", "bench", "fact-memory-bench"
CONFIGS = [(1_000, 1), (10_000, 1), (100_000, 1), (100_000, 100)]


def locomo() -> tuple[list[str], list[str]]:
    """Dialogue turns and questions, or nothing when the evaluation file is absent."""
    if not LOCOMO.is_file():
        return [], []
    samples = json.loads(LOCOMO.read_text())
    turns = [
        f"{turn['speaker']}: {turn['text']}"
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    return turns, [qa["question"] for sample in samples for qa in sample["qa"]]


# fmt: off
FIRST = ("Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonas",
         "Keiko", "Liam", "Mara", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tariq",
         "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zara", "Amir", "Bea", "Caleb", "Dana")
LAST = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Novak", "Haddad", "Silva", "Brennan",
        "Kowalski", "Reyes", "Fischer", "Osei", "Dubois", "Kaur", "Petrov", "Larsen", "Mendes",
        "Nakamura", "Quist", "Romero")
PLACES = ("Lisbon", "Osaka", "the Lake District", "Nairobi", "Montreal", "Krakow", "Cape Town",
          "Busan", "Valparaiso", "Tbilisi", "Bergen", "Hanoi", "Cork", "Lyon", "Tucson",
          "Adelaide", "Ghent", "Oaxaca", "Tromso", "Zanzibar")
WHEN = ("last spring", "in 2019", "two years ago", "at the end of March", "before the pandemic",
        "in the autumn of 2021", "after graduating", "during the winter break", "in early June")
# fmt: on
#: Clause families; a fact joins two from different families, so near-duplicates stay rare.
CLAUSES = (
    (
        "moved to {p} {w} to work as a {job}",
        {
            "job": "nurse|carpenter|data analyst|chef|pilot|"
            "teacher|architect|vet|translator|electrician|librarian|paramedic"
        },
    ),
    (
        "keeps a {col} {thing} in the {room}",
        {
            "col": "red|grey|striped|tiny|vintage|green|golden|battered",
            "thing": "bicycle|piano|armchair|bookcase|surfboard|telescope|sewing machine|"
            "record player|aquarium",
            "room": "hallway|garage|attic|study|kitchen|spare bedroom",
        },
    ),
    (
        "prefers {food} over {food2}",
        {
            "food": "green tea|black coffee|sushi|lentil soup|dark "
            "chocolate|pho|tapas|falafel|ramen|oat porridge",
            "food2": "pizza|burgers|ice cream|fries|pasta|doughnuts|fried chicken|nachos",
        },
    ),
    (
        "is learning the {inst} with a teacher from {p}",
        {"inst": "cello|violin|drums|guitar|flute|piano|saxophone|harp|trumpet|ukulele"},
    ),
    (
        "adopted a {col} {pet} called {pn} {w}",
        {
            "col": "ginger|black|white|spotted|grey|brown",
            "pet": "kitten|puppy|rabbit|tortoise|parrot|ferret|hamster",
            "pn": "Biscuit|Pepper|Luna|Mochi|Rusty|Clover|Ziggy|Olive|Bramble|Nacho",
        },
    ),
    (
        "ran a {race} in {p} in {mins} minutes",
        {
            "race": "half marathon|10k|trail race|marathon|charity 5k",
            "mins": "|".join(str(n) for n in range(24, 290, 7)),
        },
    ),
    (
        "is allergic to {allergen}",
        {
            "allergen": "peanuts|shellfish|penicillin|cats|pollen|"
            "latex|sesame|wasp stings|dust mites|kiwi fruit"
        },
    ),
    (
        "volunteers at a {org} on {day}s",
        {
            "org": "food bank|animal shelter|library|community "
            "garden|hospice|repair cafe|youth club",
            "day": "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday",
        },
    ),
    (
        "is saving up for a {goal}",
        {
            "goal": "camper van|house deposit|trip to {p}|new laptop|"
            "pottery kiln|sailing course|electric bike|wedding"
        },
    ),
    (
        "speaks {lang} because {why}",
        {
            "lang": "Portuguese|Japanese|Swahili|Polish|Korean|Greek|"
            "Finnish|Arabic|Vietnamese|Welsh",
            "why": "a grandparent taught it|of a year abroad|of work|"
            "a partner speaks it|of evening classes",
        },
    ),
    (
        "reads {genre} before bed",
        {
            "genre": "crime novels|science fiction|poetry|history books|"
            "graphic novels|cookbooks|travel memoirs|philosophy"
        },
    ),
    (
        "drives a {col} {car} that broke down {w}",
        {
            "col": "blue|silver|white|rust-coloured|black",
            "car": "van|hatchback|pickup truck|estate car|scooter|campervan",
        },
    ),
)


def _fact(rng: random.Random) -> str:
    first, second = rng.sample(CLAUSES, 2)
    parts = []
    for template, slots in (first, second):
        values = {k: rng.choice(v.split("|")) for k, v in slots.items()}
        text = template.format(p="{p}", w="{w}", **values)
        parts.append(text.format(p=rng.choice(PLACES), w=rng.choice(WHEN)))
    return f"{rng.choice(FIRST)} {rng.choice(LAST)} {parts[0]}, and {parts[1]}."


def corpus(count: int, seed: int = 7) -> list[str]:
    """``count`` texts, distinct after normalisation: LoCoMo turns, then generated facts."""
    turns, _ = locomo()
    rng, seen, out = random.Random(seed), set[str](), list[str]()
    for text in turns:
        if len(out) < count and (key := rec.normalise(text)) and key not in seen:
            seen.add(key)
            out.append(text)
    while len(out) < count:
        text = _fact(rng)
        if (key := rec.normalise(text)) not in seen:
            seen.add(key)
            out.append(text)
    return out


def questions(count: int, seed: int = 11) -> list[str]:
    _, asked = locomo()
    rng = random.Random(seed)
    generated = [
        f"What does {rng.choice(FIRST)} {rng.choice(['do for work', 'like to eat', 'play', 'own'])}"
        f" and where did they go {rng.choice(WHEN)}?"
        for _ in range(count)
    ]
    return (asked + generated)[:count]


async def embed_all(texts: list[str]) -> np.ndarray:
    """Unit vectors for ``texts`` by the services' backend, cached under the temp directory
    between runs."""
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"vectors-{DEFAULT_BACKEND}-{len(texts)}-{key}.npy"
    if path.is_file():
        cached: np.ndarray = np.load(path)
        return cached
    embedder = SentenceTransformerEmbedder(torch_threads=os.cpu_count() or 1, max_batch=256)
    await embedder.start()
    started, chunks = time.perf_counter(), []
    for n in range(0, len(texts), 2048):
        chunks.append(np.asarray(await embedder.embed(texts[n : n + 2048]), dtype=np.float32))
        print(f"  setup: embedded {n + len(chunks[-1]):,} texts "
              f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
    vectors = np.concatenate(chunks)
    CACHE.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


class _Dimension:
    """Stands in for the embedder where only the vector size matters (setup writes)."""

    model_name, dimension = "all-MiniLM-L6-v2", 384

    async def start(self) -> None: ...

    async def embed(self, texts: object) -> list[list[float]]:
        raise AssertionError("setup never embeds")


def scopes(count: int) -> list[Scope]:
    if count == 1:
        return [Scope(WORKSPACE, "bench")]
    return [Scope(WORKSPACE, f"c{n:03d}") for n in range(count)]


async def preload(
    data_dir: Path, where: list[Scope], texts: list[str], vectors: np.ndarray
) -> list[float]:
    """Write facts straight into the store with the service's own record layout, indexing
    as the service's store does while it grows (its default ``index_after``, as if idle
    each time); return the seconds each indexing run took (the process stalls that long)."""
    store = EdgeStore(data_dir, flush_interval=0)
    stalls = []
    await store.open()
    memory = FactMemory(store, _Dimension(), policy=rec.FactPolicy(), clock=time.time)
    await memory.ensure()
    now = time.time()
    for n, scope in enumerate(where):  # text i goes to scope i % len(where)
        await memory.ctx.scopes.remember(scope)
        mine = range(n, len(texts), len(where))
        for first in range(0, len(mine), 1000):
            records = []
            for i in mine[first : first + 1000]:
                normalised = rec.normalise(texts[i])
                payload = rec.new_payload(
                    scope, content=texts[i], normalised=normalised, now=now, importance=0.5,
                    confidence=0.7, expires_at=rec.NEVER, metadata={}, source_conversation=None,
                    request_id=None,
                )  # fmt: skip
                records.append(Record(rec.fact_id(scope, normalised), payload, vectors[i].tolist()))
            await memory.ctx.upsert(records)
            if await store.index_due(idle=True):
                stalls.append(store.last_index_seconds)
    await store.close()
    return stalls


async def optimize(data_dir: Path) -> float:
    store = EdgeStore(data_dir, flush_interval=0)
    await store.open()
    await FactMemory(store, _Dimension(), policy=rec.FactPolicy(), clock=time.time).ensure()
    started = time.perf_counter()
    await store.optimize("facts-384")
    elapsed = time.perf_counter() - started
    await store.close()
    return elapsed


class Service:
    """The fact-memory processor in its own process, and a client of it."""

    def __init__(self, url: str, tmp: Path, data_dir: Path) -> None:
        self.url, self.tmp, self.data_dir = url, tmp, data_dir
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Client:
        topics = {s: f"{s}:tg:fact-memory:{WORKSPACE}:{FLOW}" for s in ("request", "response")}
        flows = self.tmp / "flows.yaml"
        flows.write_text(json.dumps({WORKSPACE: {f"processor:{PID}": {FLOW: {"topics": topics}}}}))
        settings = self.tmp / "settings.yaml"
        settings.write_text(json.dumps({"data_dir": str(self.data_dir), "sweep_interval": 3600,
                                        "max_facts_per_scope": 1_000_000}))  # fmt: skip
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "react_mem.cli", "run",
            "memory_services.facts.service.FactMemoryProcessor", "--id", PID, "--flows",
            str(flows), "-p", self.url, "--no-metrics", "-l", "WARNING", "--settings",
            str(settings), "--state-dir", str(self.tmp / "state"),
        )  # fmt: skip
        self.transport = PulsarTransport(PulsarOptions(url=self.url))
        await self.transport.connect()
        self.rpc: RequestResponseClient[Any, FactResponse] = RequestResponseClient(
            self.transport, topics["request"], topics["response"], FactResponse,
            subscriber="bench", timeout=120,
        )  # fmt: skip
        await self.rpc.start()
        deadline = time.monotonic() + 180
        while True:  # requests sent before the service subscribes are dropped
            try:
                await FactClient(self.rpc, timeout=1).page(Scope(WORKSPACE, "default"), limit=1)
                return FactClient(self.rpc)
            except RequestTimeout:
                if time.monotonic() > deadline:
                    raise

    def rss_mib(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    async def __aexit__(self, *exc: object) -> None:
        await self.rpc.close()
        await self.transport.close()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 60)


async def ingest(
    client: Client, where: list[Scope], texts: list[str], batch: int, writers: int = 1
) -> str:
    """``writers`` callers store the batches, each sending its next when answered."""
    added = reinforced = 0
    batches = list(enumerate(range(0, len(texts), batch)))
    started = time.perf_counter()

    async def writer() -> None:
        nonlocal added, reinforced
        while batches:
            n, first = batches.pop(0)
            facts = [FactInput(content=t) for t in texts[first : first + batch]]
            reply = await client.store(where[n % len(where)], facts)
            added += sum(s.status == "added" for s in reply.stored)
            reinforced += sum(s.status == "reinforced" for s in reply.stored)

    await asyncio.gather(*(writer() for _ in range(writers)))
    rate = len(texts) / (time.perf_counter() - started)
    verdict = "PASS" if rate >= TARGET_INGEST else "FAIL"
    return (f"ingest through the bus: {rate:,.0f} facts/s over {len(texts):,} facts in batches "
            f"of {batch}, {writers} writer(s) ({added} added, {reinforced} reinforced as "
            f"near-duplicates) [target >= {TARGET_INGEST:g}: {verdict}]")  # fmt: skip


async def retrieval(
    client: Client, where: list[Scope], asked: list[str], warmup: int, mode: RetrievalMode
) -> str:
    latencies = []
    for n, query in enumerate(asked):
        started = time.perf_counter()
        found = await client.retrieve(
            where[n % len(where)], query, top_k=5, retrieval=RetrievalOptions(mode=mode)
        )
        elapsed = (time.perf_counter() - started) * 1000
        assert found, query
        if n >= warmup:
            latencies.append(elapsed)
    q = statistics.quantiles(latencies, n=100)
    ok = "PASS" if q[49] <= TARGET_P50_MS and q[98] <= TARGET_P99_MS else "FAIL"
    return (f"{mode} retrieval p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, max {max(latencies):.1f} ms "
            f"over {len(latencies)} queries (top_k 5) [targets p50 <= {TARGET_P50_MS:g}, "
            f"p99 <= {TARGET_P99_MS:g}: {ok}]")  # fmt: skip


async def run(args: argparse.Namespace, url: str, tmp: Path) -> None:
    largest = max(size for size, _ in CONFIGS if size in args.sizes)
    texts = corpus(largest)
    vectors = await embed_all(texts)
    asked = questions(args.queries + args.warmup)
    for size, scope_count in CONFIGS:
        if size not in args.sizes or (scope_count > 1 and not args.spread):
            continue
        where, sample = scopes(scope_count), min(args.sample, size // 2)
        bus = size - 2 * sample  # first text ingested through the bus
        print(
            f"\n== {size:,} facts in {scope_count} scope(s): {bus:,} written straight into the "
            f"store, then {sample:,} through the bus before and {sample:,} after optimize"
        )
        data_dir = tmp / f"store-{size}-{scope_count}"
        stalls = await preload(data_dir, where, texts[:bus], vectors[:bus])
        if stalls:
            median = statistics.median(stalls)
            print(f"  indexed while growing: {len(stalls)} runs, {median:.1f} s median, "
                  f"{max(stalls):.1f} s max (the process stalls during each)")  # fmt: skip
        service, batch = Service(url, tmp, data_dir), args.batch
        async with service as client:
            print("  as grown (indexed by the store as it went):")
            part = texts[bus : bus + sample]
            each = len(part) // len(args.writers)
            for n, writers in enumerate(args.writers):
                share = part[n * each : (n + 1) * each]
                print("    " + await ingest(client, where, share, batch, writers))
            for mode in args.modes:
                print("    " + await retrieval(client, where, asked, args.warmup, mode))
            rss = service.rss_mib()
        seconds = await optimize(data_dir)
        async with service as client:
            print(f"  after a full EdgeStore.optimize() ({seconds:.0f} s, offline):")
            part = texts[bus + sample : size]
            each = len(part) // len(args.writers)
            for n, writers in enumerate(args.writers):
                share = part[n * each : (n + 1) * each]
                print("    " + await ingest(client, where, share, batch, writers))
            for mode in args.modes:
                print("    " + await retrieval(client, where, asked, args.warmup, mode))
            rss = max(rss, service.rss_mib())
        print(f"  service RSS (VmRSS): {rss:,.0f} MiB; load average now {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--no-spread", dest="spread", action="store_false",
                        help="skip 100k facts over 100 scopes")  # fmt: skip
    parser.add_argument("--queries", type=int, default=300, help="timed retrievals")
    parser.add_argument("--warmup", type=int, default=30, help="untimed retrievals first")
    parser.add_argument(
        "--sample", type=int, default=1024, help="facts ingested via the bus, in each state"
    )
    parser.add_argument("--batch", type=int, default=64, help="facts per store request")
    parser.add_argument("--writers", type=int, nargs="+", default=[1],
                        help="concurrent store callers; several split the sample")  # fmt: skip
    parser.add_argument("--modes", nargs="+", default=["hybrid", "dense"],
                        choices=["dense", "lexical", "hybrid"], help="rankings timed")  # fmt: skip
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; texts: "
          f"{'LoCoMo turns + generated' if LOCOMO.is_file() else 'generated'}; "
          f"service: {DEFAULT_BACKEND} embeddings on 1 thread, edge store; "
          f"settings: {vars(args)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="fact-bench-") as name:
        tmp = Path(name)
        broker = EmbeddedBroker(tmp / "broker")
        url = broker.start()
        try:
            asyncio.run(run(args, url, tmp))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
