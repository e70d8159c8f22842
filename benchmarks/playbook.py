"""playbook-memory: retrieval latency at 1k and 10k bullets, deltas per second, and 2,000
synthetic deltas with known-helpful bullets among noise (size over time, survivors).

Everything runs in this process on one event loop: an embedded broker, the real
``PlaybookMemoryProcessor`` (edge store in a temp dir, MiniLM embeddings) and a client
that talks to it over the bus, so every figure includes the bus round trip.

1. Latency: one playbook filled to 1k, then 10k bullets (ADD deltas of 250; near-duplicate
   merging is switched off here, dedup and reinforce thresholds 1.0, so that the scope
   really holds that many), then ``retrieve`` (top 10, default weights) timed with the
   query text (embedding included) and with a pre-embedded vector; and the time of a
   one-ADD delta at that size (a version snapshot is O(bullets)).
2. Deltas per second at the default ``max_bullets`` (100): one ADD + two TAGs per delta,
   sequential in one playbook, then spread over four playbooks concurrently.
3. Learning simulation, shipped settings (max 100 bullets, dedup 0.85, reinforce 0.9):
   20 known-helpful strategies, one per task topic. Each step retrieves the top 8 for a
   task (half the tasks are on a known topic, half are noise), tags what was retrieved
   (the topic's strategy helpful; other known strategies neutral; noise helpful 20%,
   harmful 30%, neutral 50%), adds 1-2 new noise lessons (helpful 1, as seed 000's
   curator does) and, one step in ten, re-adds the topic's strategy (a relearned lesson).
   Run with each weights preset and the shipped defaults (docs/ace.md); ``--gains`` and
   ``--floors`` override ``reinforcement_gain`` and ``min_relevance`` (``--gains 0
   --floors 0``: the seeds' own model, where pruning by decay is pruning by recency of
   use). ``--sweep 10,5`` repeats it with fewer known strategies, each needed more often.

    python benchmarks/playbook.py            # sizes 1000,10000; 2,000 simulated deltas
    python benchmarks/playbook.py --quick    # 1000 bullets; 300 simulated deltas
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.playbook import PlaybookClient, PlaybookRef
from react_mem.embedding.shared import shared_embedder
from react_mem.schema.playbook import Delta, DeltaOperation, PlaybookResponse

WS, FLOW = "default", "bench"
#: The settings the simulation reports and ``--gains``/``--floors`` may override.
SIMULATED = ("reinforcement_gain", "min_relevance")
#: The share of simulated tasks on a known strategy's topic (the rest are noise tasks).
ON_TOPIC = 0.5
Client = PlaybookClient
#: The collection-wide playbook of the default collection and context.
SHARED = PlaybookRef()

# fmt: off
DOMAINS = ("invoices", "flight bookings", "SQL reports", "unit conversions", "legal clauses",
           "medical dosages", "board game rules", "tax forms", "shipping labels", "API errors",
           "spreadsheet formulas", "recipes", "timetables", "insurance claims", "git merges",
           "chemistry units", "payroll", "exam grading", "map directions", "log files")
ADVICE = ("double-check every total", "quote the source line", "state the assumption made",
          "ask which version applies", "convert to one unit before comparing",
          "list the constraints before answering", "prefer the newest document",
          "show the intermediate steps", "round only at the end", "name the rule being applied",
          "keep the original wording of names", "check for missing fields",
          "sort the entries by date", "flag values outside the normal range",
          "give the answer in the requested format", "cite the section number",
          "repeat the question's key figures", "mention what could not be verified")
QUALIFIERS = ("", " carefully", " twice", " before replying", " in the final answer",
              " when the input is long", " if anything looks inconsistent", " every time")
#: (topic, a task on it, the strategy that helps with it)
HELPFUL = (
    ("invoice arithmetic", "Is this invoice total right: 3 items at 4.50 and 2 at 10, total 33.50?",
     "Recompute invoice totals from the line items instead of trusting the stated total."),
    ("airport codes", "Find me a flight from Lisbon to Osaka next Tuesday.",
     "Map city names to IATA airport codes before searching for flights."),
    ("SQL joins", "Write a query listing each customer with their orders.",
     "Write the JOIN condition explicitly before adding any WHERE filter."),
    ("temperature conversion", "It is 98 degrees Fahrenheit; what is that in Celsius?",
     "Convert Fahrenheit to Celsius by subtracting 32 and multiplying by five ninths."),
    ("contract deadlines", "The contract needs 30 days' notice; when must I send it to end in May?",
     "Count contract notice periods in calendar days unless business days are stated."),
    ("paediatric dosing", "How much paracetamol can a 4-year-old weighing 16 kg take?",
     "Compute children's medicine doses from body weight in kilograms."),
    ("chess openings", "After 1.e4 e5 2.Nf3 Nc6 3.Bb5, what should White aim for?",
     "Name the chess opening from the first three moves before suggesting a plan."),
    ("VAT", "The price is 120 including 20% VAT; what is the VAT amount?",
     "Apply VAT to the net price, never to a price that already includes it."),
    ("parcel sizes", "Can I ship a 100 x 40 x 30 cm box with a carrier's 300 cm limit?",
     "Measure parcels as length plus girth when carriers set a size limit."),
    ("HTTP 429", "The API keeps answering 429 Too Many Requests; what should the client do?",
     "Back off exponentially after an HTTP 429 response and honour Retry-After."),
    ("spreadsheet references", "My formula breaks when I copy it down the column; why?",
     "Use absolute cell references for constants copied across rows."),
    ("baking ratios", "How do I make this cake recipe for 12 people instead of 8?",
     "Scale recipes by weight rather than by cups when changing the yield."),
    ("train connections", "Is a 5-minute change of trains at Frankfurt Hbf enough?",
     "Allow at least ten minutes for a change of trains at large stations."),
    ("claim evidence", "A customer says the parcel arrived damaged; how do I assess the claim?",
     "Ask for the incident date and a photo before assessing a damage claim."),
    ("merge conflicts", "I fixed the merge conflict in main.py; can I commit now?",
     "Run the tests after resolving a merge conflict, before committing."),
    ("molar mass", "What is the molar mass of sulfuric acid?",
     "Sum atomic masses from the periodic table to get a compound's molar mass."),
    ("overtime pay", "She worked 46 hours at 20 per hour; what is her weekly pay?",
     "Pay overtime at one and a half times the hourly rate past forty hours."),
    ("grading curves", "Should I curve the exam before or after marking with the rubric?",
     "Grade against the published rubric before applying any curve."),
    ("walking routes", "How do I walk from the station to the museum?",
     "Give walking directions with street names and distances, not only turns."),
    ("log timestamps", "Put these server log lines from two regions in order.",
     "Normalise log timestamps to UTC before ordering events."),
)
# fmt: on


def noise(rng: random.Random) -> tuple[str, str]:
    domain = rng.choice(DOMAINS)
    return domain, f"For {domain}, {rng.choice(ADVICE)}{rng.choice(QUALIFIERS)}."


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):6.1f} ms  p99 {p99:6.1f} ms  (n={len(ms)})"


@contextlib.asynccontextmanager
async def service(
    transport: PulsarTransport, root: Path, tag: str, **settings: Any
) -> AsyncIterator[Client]:
    pid = f"playbook-{tag}"
    queues = {s: f"{s}:tg:playbook-memory-{tag}:{WS}:{FLOW}" for s in ("request", "response")}
    flows = root / f"flows-{tag}.json"
    flows.write_text(json.dumps({WS: {f"processor:{pid}": {FLOW: {"topics": queues}}}}))
    loaded = PlaybookMemoryProcessor.Settings.load(
        {"id": pid, "flows": flows, "data_dir": root / tag, "metrics": False, **settings}
    )
    processor = PlaybookMemoryProcessor(loaded, transport, registry=CollectorRegistry())
    await processor.start()
    rpc: RequestResponseClient[Any, PlaybookResponse] = RequestResponseClient(
        transport, queues["request"], queues["response"], PlaybookResponse, timeout=300
    )
    await rpc.start()
    try:
        yield PlaybookClient(rpc)
    finally:
        await rpc.close()
        await processor.stop()


async def apply(
    client: Client, delta_id: str, ops: list[DeltaOperation], context: str = ""
) -> PlaybookResponse:
    delta = Delta(delta_id=delta_id, operations=ops)
    return await client.apply_delta(PlaybookRef(context=context), delta)


def lesson(n: int, rng: random.Random) -> str:
    _, text = noise(rng)
    return f"{text[:-1]} (case {n}: {rng.choice(DOMAINS)})."


async def latency(transport: PulsarTransport, root: Path, sizes: list[int], queries: int) -> None:
    print("\n1. retrieval latency over the bus (top 10, default weights)")
    rng = random.Random(3)
    settings = {"max_bullets": 50_000, "max_operations": 1000, "dedup_threshold": 1.0,
                "reinforce_threshold": 1.0}  # fmt: skip
    async with service(transport, root, "latency", **settings) as client:
        held, batch = 0, 250
        probes = [noise(rng)[1] for _ in range(queries + 20)]
        embedder = shared_embedder(PlaybookMemoryProcessor.Settings.load({"id": "bench"}))
        await embedder.start()  # the service's own (one per process and model)
        vectors = await embedder.embed(probes)
        for size in sizes:
            started = time.perf_counter()
            while held < size:
                n = min(batch, size - held)
                ops = [DeltaOperation(type="ADD", content=lesson(held + i, rng)) for i in range(n)]
                await apply(client, f"fill-{held}", ops)
                held += n
            count = (await client.stats(SHARED)).count
            print(f"  {count} bullets (filled in {time.perf_counter() - started:.1f} s)")
            for label, field in (("query text", "query"), ("query vector", "vector")):
                samples = []
                for n, probe in enumerate(probes):
                    value: Any = probe if field == "query" else vectors[n]
                    t0 = time.perf_counter()
                    await client.retrieve(SHARED, top_k=10, **{field: value})
                    if n >= 20:
                        samples.append(time.perf_counter() - t0)
                print(f"  retrieve, {label:12s} {percentiles(samples)}")
            samples = []
            for n in range(10):
                t0 = time.perf_counter()
                await apply(
                    client,
                    f"one-{size}-{n}",
                    [DeltaOperation(type="ADD", content=lesson(10**6 + n, rng))],
                )
                samples.append(time.perf_counter() - t0)
                held += 1
            print(f"  one-ADD delta at this size  {percentiles(samples)}")


async def throughput(transport: PulsarTransport, root: Path, count: int) -> None:
    print("\n2. deltas per second (max_bullets 100; 1 ADD + 2 TAGs each)")
    rng = random.Random(5)
    async with service(transport, root, "throughput") as client:

        async def run(context: str, n: int) -> None:
            alive: set[str] = set()
            for i in range(n):
                ops = [DeltaOperation(type="ADD", content=lesson(i, rng), helpful=1)]
                ops += [
                    DeltaOperation(type="TAG", bullet_id=b, helpful=1)
                    for b in rng.sample(sorted(alive), min(2, len(alive)))
                ]
                done = await apply(client, f"{context}-{i}", ops, context)
                for c in done.changes:
                    if c.change == "added":
                        alive.add(c.bullet_id)
                    elif c.change in ("merged", "pruned", "removed"):
                        alive.discard(c.bullet_id)

        await run("warm", 20)
        started = time.perf_counter()
        await run("one", count)
        elapsed = time.perf_counter() - started
        rate = f"{count / elapsed:6.1f} deltas/s ({count} in {elapsed:.1f} s)"
        print(f"  one playbook, sequential:   {rate}")
        started = time.perf_counter()
        await asyncio.gather(*(run(f"four-{k}", count // 4) for k in range(4)))
        elapsed = time.perf_counter() - started
        rate = f"{count / elapsed:6.1f} deltas/s ({count} in {elapsed:.1f} s)"
        print(f"  four playbooks, concurrent: {rate}")


async def simulation(
    transport: PulsarTransport,
    root: Path,
    steps: int,
    preset: str,
    count: int,
    overrides: dict[str, float],
) -> None:
    strategies = HELPFUL[:count]
    shipped = PlaybookMemoryProcessor.Settings.load({"id": "bench"})
    effective = {k: overrides.get(k, getattr(shipped, k)) for k in SIMULATED}
    shown = ", ".join(
        f"{k} {v}{'' if k in overrides else ' (default)'}" for k, v in effective.items()
    )
    print(
        f"\n3. {steps} synthetic deltas, weights {preset!r}, {shown}, "
        f"{count} known-helpful strategies (each needed every ~{count / ON_TOPIC:.0f} tasks)"
    )
    rng = random.Random(11)
    tag = f"sim-{preset}-{count}-" + "-".join(f"{v}" for v in overrides.values())
    async with service(transport, root, tag, **overrides) as client:
        seeded = await apply(client, "known", [
            DeltaOperation(type="ADD", content=text, topic=topic, helpful=1)
            for topic, _, text in strategies
        ])  # fmt: skip
        known = {c.bullet_id: t for c, (t, _, _) in zip(seeded.changes, strategies, strict=True)}
        changes: dict[str, int] = {}
        lost: set[str] = set()
        helpful_hits = asked = 0
        columns = ("deltas", "bullets", "kept", "present", "added", "merged", "pruned")
        print("  " + " ".join(f"{c:>7}" for c in columns) + " reinforced hit rate")
        timings: list[float] = []
        for step in range(1, steps + 1):
            on_topic = rng.random() < ON_TOPIC
            if on_topic:
                topic, query, text = rng.choice(strategies)
                asked += 1
            else:
                topic, query = noise(rng)
            found = await client.retrieve(SHARED, query, top_k=8, weights=preset)
            ops: list[DeltaOperation] = []
            for b in found:
                if known.get(b.id) == topic:
                    ops.append(DeltaOperation(type="TAG", bullet_id=b.id, helpful=1))
                    helpful_hits += 1
                elif b.id in known:
                    ops.append(DeltaOperation(type="TAG", bullet_id=b.id, neutral=1))
                else:
                    kind = rng.choices(("helpful", "harmful", "neutral"), (0.2, 0.3, 0.5))[0]
                    ops.append(DeltaOperation(type="TAG", bullet_id=b.id, **{kind: 1}))
            for _ in range(rng.choice((1, 2))):
                ops.append(DeltaOperation(type="ADD", content=noise(rng)[1], helpful=1))
            if on_topic and rng.random() < 0.1:
                ops.append(DeltaOperation(type="ADD", content=text, topic=topic, helpful=1))
            t0 = time.perf_counter()
            done = await apply(client, f"step-{step}", ops)
            timings.append(time.perf_counter() - t0)
            for c in done.changes:
                changes[c.change] = changes.get(c.change, 0) + 1
                if c.change in ("pruned", "removed", "merged") and c.bullet_id in known:
                    lost.add(c.bullet_id)
            if step % max(1, steps // 10) == 0 or step == steps:
                listed = (await client.page(SHARED, limit=1000)).items
                present = {b.id for b in listed} & known.keys()
                row = (step, len(listed), len(present - lost), len(present))
                row += tuple(changes.get(k, 0) for k in ("added", "merged", "pruned"))
                hits = helpful_hits / max(asked, 1)
                print(
                    "  "
                    + " ".join(f"{v:>7}" for v in row)
                    + f" {changes.get('reinforced', 0):>10} {hits:>8.2f}"
                )
        listed = (await client.page(SHARED, limit=1000)).items
        marks = sorted(b.helpful for b in listed if b.id in known.keys() - lost)
        print(f"  delta apply {percentiles(timings)}; {steps / sum(timings):.1f} deltas/s")
        print(f"  known-helpful strategies never pruned: {len(marks)}/{len(known)}")
        print(f"  their helpful marks: {marks}")
        print("  (kept: never pruned or merged away; present: kept or relearned by a later ADD;")
        print("   hit rate: on-topic tasks whose retrieval returned the topic's strategy)")


async def run(args: argparse.Namespace, url: str, root: Path) -> None:
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}")
    transport = PulsarTransport(PulsarOptions(url=url))
    await transport.connect()
    try:
        if args.sizes:
            await latency(transport, root, [int(s) for s in args.sizes.split(",")], args.queries)
        if args.deltas:
            await throughput(transport, root, args.deltas)
        for gain in args.gains.split(","):
            for floor in args.floors.split(","):
                overrides = {
                    k: float(v)
                    for k, v in (("reinforcement_gain", gain), ("min_relevance", floor))
                    if v not in ("", "default")
                }
                for preset in [p for p in args.presets.split(",") if p]:
                    await simulation(transport, root, args.steps, preset, len(HELPFUL), overrides)
        for count in [int(k) for k in args.sweep.split(",") if k]:
            await simulation(transport, root, args.steps, "default", count, {})
    finally:
        await transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="bullets per scope, comma-separated")
    parser.add_argument("--queries", type=int, default=200, help="timed retrievals per size")
    parser.add_argument("--deltas", type=int, default=200, help="deltas for the rate")
    parser.add_argument("--steps", type=int, default=2000, help="simulated deltas")
    parser.add_argument("--presets", default="default,relevance-dominant")
    parser.add_argument(
        "--gains", default="default", help="reinforcement_gain values ('default': the shipped one)"
    )
    parser.add_argument(
        "--floors", default="default", help="min_relevance values ('default': the shipped one)"
    )
    parser.add_argument(
        "--sweep", default="", help="known-strategy counts run again (shipped defaults)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.queries, args.deltas, args.steps = "1000", 50, 40, 300
    with tempfile.TemporaryDirectory(prefix="playbook-bench-") as name:
        root = Path(name)
        broker = EmbeddedBroker(root / "broker")
        url = broker.start()
        try:
            asyncio.run(run(args, url, root))
        finally:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
