"""Does one maximum-size batch stall its neighbours? (issue 26, finding 4)

One process, as ``react-mem up`` runs it: an embedded broker, fact-memory and
episode-memory sharing the process's real embedder (the default model, offline) and PII
screen (the default policy, redact). A caller sends small requests back to back for
another user (a fact ``retrieve``, an episode ``retrieve`` and a one-fact ``store``, each
timed alone), first alone, then while another caller stores the biggest valid batch
(``--facts`` facts of ``--chars`` characters, default 256 x 4,000). Prints p50/p99/max
latency of each kind of small request in both phases side by side, and how long the
batch took.

    OMP_NUM_THREADS=1 python benchmarks/big_batch.py
    OMP_NUM_THREADS=1 python benchmarks/big_batch.py --facts 64 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry

from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.memory_services import MovableClock, serving, topics

WORDS = [
    "river",
    "lantern",
    "copper",
    "meadow",
    "quiet",
    "harbour",
    "velvet",
    "orbit",
    "ember",
    "willow",
    "signal",
]


def text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:chars]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000


KINDS = ("fact retrieve", "episode retrieve", "fact store (one)")


async def smalls(facts: object, episodes: object, until: float) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {kind: [] for kind in KINDS}
    n = 0
    while n == 0 or time.perf_counter() < until:  # one round at least
        n += 1
        requests = (
            (facts, FactRequest(operation="retrieve", user="bob", query="where is the lantern")),
            (episodes, EpisodeRequest(operation="retrieve", user="bob", goal="lantern")),
            (facts, FactRequest(operation="store", user="bob", facts=[FactInput(
                content=f"bob keeps lantern number {n} in shed {time.time_ns()}")])),
        )  # fmt: skip
        for kind, (service, request) in zip(KINDS, requests, strict=True):
            began = time.perf_counter()
            reply = await service.ask(request, "ws")  # type: ignore[attr-defined]
            took[kind].append(time.perf_counter() - began)
            if reply.error is not None:
                raise SystemExit(f"{kind} failed: {reply.error}")
    return took


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        transport = PulsarTransport(PulsarOptions(url=broker.url))
        await transport.connect()
        unique, registry = uuid.uuid4().hex[:8], CollectorRegistry()
        # No embedder given: each service gets the process's shared one, as in the stack.
        common = {"registry": registry, "clock": MovableClock()}
        async with (
            serving(
                FactMemoryProcessor,
                FactResponse,
                transport,
                pid=f"facts-{unique}",
                queues={"ws": topics("fact-memory", unique, "ws")},
                data_dir=Path(tmp) / "facts",
                metrics=False,
                **common,  # type: ignore[arg-type]
            ) as facts,
            serving(
                EpisodeMemoryProcessor,
                EpisodeResponse,
                transport,
                pid=f"episodes-{unique}",
                queues={"ws": topics("episode-memory", unique, "ws")},
                data_dir=Path(tmp) / "episodes",
                metrics=False,
                **common,  # type: ignore[arg-type]
            ) as episodes,
        ):
            for client in facts.clients.values():
                client.timeout = 600
            await smalls(facts, episodes, time.perf_counter() + 2)  # warm
            alone = await smalls(facts, episodes, time.perf_counter() + args.seconds)
            batch = [FactInput(content=text(rng, args.chars)) for _ in range(args.facts)]
            began = time.perf_counter()
            store = asyncio.create_task(
                facts.ask(FactRequest(operation="store", user="ada", facts=batch), "ws")
            )
            beside: dict[str, list[float]] = {kind: [] for kind in KINDS}
            while not store.done():
                for kind, took in (await smalls(facts, episodes, time.perf_counter())).items():
                    beside[kind] += took
            reply = await store
            took = time.perf_counter() - began
        await transport.close()
    if reply.error is not None:
        print(f"the batch failed: {reply.error}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{args.facts} facts x {args.chars} chars stored in {took:.1f} s")
    print("small requests, another user's          n    p50 ms   p99 ms   max ms")
    for kind in KINDS:
        for name, values in (("alone", alone[kind]), ("beside the batch", beside[kind])):
            print(
                f"  {kind + ', ' + name:<36}{len(values):>5}{pct(values, 50):>9.1f}"
                f"{pct(values, 99):>9.1f}{max(values) * 1000:>9.1f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=256)
    parser.add_argument("--chars", type=int, default=4000)
    parser.add_argument("--seconds", type=float, default=5.0)
    asyncio.run(main(parser.parse_args()))
