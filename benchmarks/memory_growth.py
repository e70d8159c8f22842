"""Memory of a fact-memory service over load rounds, with and without paging out shard files.

Two fact-memory services run side by side, each in its own OS process on its own embedded
broker (as in ``fact_memory.py``): one as configured by default, whose edge store pages out
its shard files' write-ahead logs and payload indexes after each flush and its vectors and
payloads past ``edge_resident_mib`` (``after``), and one with ``edge_page_out`` off
(``before``: the pages stay until the kernel runs short). Every request goes to both, so
they hold the same facts. Each round sends ``--seconds`` of load from ``--callers``
concurrent clients: stores of new facts (texts of varied lengths) and retrievals, over
``--users`` users in ``--collections`` collections. After each round it prints each
service's RSS split into anonymous memory (the heap: Python, the engine's in-RAM structures,
ONNX Runtime) and file-backed pages, the shard files among them by kind (``log``: write-ahead
logs, ``data``: vectors and payloads, ``index``: payload indexes and id trackers), and the
store's size on disk. Then both restart on their state for one more round.

    OMP_NUM_THREADS=1 python benchmarks/memory_growth.py --rounds 3 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from fact_memory import WORKSPACE, Client, Service, corpus, questions

from memory_services.store import residency
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.schema.facts import FactInput
from react_mem.schema.scope import Scope

#: The configurations compared: their names and the environment that sets them.
VARIANTS = {"before": {"REACT_MEM_EDGE_PAGE_OUT": "false"}, "after": {}}


def memory(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile and VmHWM of a process, in MiB."""
    wanted = {"VmRSS", "RssAnon", "RssFile", "VmHWM"}
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            out[key] = int(value.split()[0]) / 1024
    return out


def mapped(pid: int, store: Path) -> dict[str, float]:
    """Resident MiB of the process's file mappings: shard files under ``store`` by kind
    (:func:`memory_services.store.residency.kind`), and all others as ``other``."""
    out = dict.fromkeys((residency.LOG, residency.DATA, residency.INDEX, "other"), 0.0)
    prefix, kind = f"{store.resolve()}/", None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            path = fields[5] if len(fields) > 5 else ""
            kind = None if not path.startswith("/") else "other"
            if path.startswith(prefix):
                kind = residency.kind(path)
        elif kind and fields[0] == "Rss:":
            out[kind] += int(fields[1]) / 1024
    return out


def disk_mib(path: Path) -> float:
    """Blocks in use (files are sparse: their sizes say more)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) / 2**20


@dataclass
class Variant:
    """One configuration's broker, service and state."""

    name: str
    env: dict[str, str]
    tmp: Path
    url: str = ""
    service: Service | None = None
    client: Client | None = None
    previous: float | None = None  # RSS at the last row of this run of the service
    #: Seconds of each retrieval this round (the query's embedding included).
    waited: list[float] = field(default_factory=list)

    @property
    def store(self) -> Path:
        return self.tmp / "store"

    def cell(self) -> str:
        """The service's memory now, in one column."""
        assert self.service is not None and self.service.proc is not None
        pid = self.service.proc.pid
        now, files = memory(pid), mapped(pid, self.store)
        grew = "" if self.previous is None else f"{now['VmRSS'] - self.previous:+.0f}"
        self.previous = now["VmRSS"]
        waited = ""
        if self.waited:
            p50, p99 = (1e3 * float(np.quantile(self.waited, q)) for q in (0.5, 0.99))
            waited, self.waited = f"; retrieve p50 {p50:3.0f} p99 {p99:4.0f} ms", []
        return (
            f"RSS {now['VmRSS']:4.0f} ({grew:>4}) anon {now['RssAnon']:3.0f}, shard files "
            f"log {files['log']:3.0f} data {files['data']:3.0f} index {files['index']:3.0f}"
            f"{waited}"
        )


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in the environment (the service process inherits it) for a while."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def start(variants: list[Variant]) -> None:
    for variant in variants:
        variant.service = Service(variant.url, variant.tmp, variant.store)
        with environment(variant.env):  # read by the process it spawns
            variant.client = await variant.service.__aenter__()
        variant.previous = None


async def stop(variants: list[Variant]) -> None:
    for variant in variants:
        if variant.service is not None:
            await variant.service.__aexit__(None, None, None)
        variant.service = variant.client = None


async def load_round(
    variants: list[Variant], args: argparse.Namespace, texts: Iterator[str], asked: list[str]
) -> tuple[int, int]:
    """``args.seconds`` of load from ``args.callers`` callers, each request sent to every
    variant's service; (stores, retrievals) done."""
    rng, deadline = random.Random(), time.monotonic() + args.seconds
    done = [0, 0]

    async def store(variant: Variant, to: Scope, facts: list[FactInput]) -> None:
        assert variant.client is not None
        await variant.client.store(to, facts)

    async def retrieve(variant: Variant, to: Scope, query: str) -> None:
        assert variant.client is not None
        started = time.perf_counter()
        await variant.client.retrieve(to, query, top_k=5)
        variant.waited.append(time.perf_counter() - started)

    async def caller() -> None:
        while time.monotonic() < deadline:
            to = Scope(WORKSPACE, f"c{rng.randrange(args.collections)}",
                       f"user-{rng.randrange(args.users)}")  # fmt: skip
            if rng.random() < args.store_share:
                facts = [FactInput(content=next(texts)) for _ in range(rng.randint(1, 4))]
                await asyncio.gather(*(store(v, to, facts) for v in variants))
                done[0] += 1
            else:
                query = rng.choice(asked)
                await asyncio.gather(*(retrieve(v, to, query) for v in variants))
                done[1] += 1

    await asyncio.gather(*(caller() for _ in range(args.callers)))
    return done[0], done[1]


def row(label: str, variants: list[Variant]) -> None:
    print(label, flush=True)
    for variant in variants:
        print(f"  {variant.name:<7}{variant.cell()}", flush=True)


async def rounds(
    variants: list[Variant], args: argparse.Namespace, texts: Iterator[str], asked: list[str],
    label: str, count: int,
) -> None:  # fmt: skip
    await start(variants)
    try:
        row(label, variants)
        for n in range(1, count + 1):
            stores, retrievals = await load_round(variants, args, texts, asked)
            row(f"round {n}: {stores} stores, {retrievals} retrievals", variants)
        disk = ", ".join(f"{v.name} {disk_mib(v.store):.0f}" for v in variants)
        print(f"store on disk (MiB): {disk}", flush=True)
    finally:
        await stop(variants)


async def run(args: argparse.Namespace, variants: list[Variant]) -> None:
    texts = itertools.cycle(corpus(args.facts))
    asked = questions(500)
    print("MiB; retrieval times through the bus, the query's embedding included", flush=True)
    await rounds(variants, args, texts, asked, "fresh", args.rounds)
    await rounds(variants, args, texts, asked, "restarted on that state", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60, help="length of a load round")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--collections", type=int, default=4)
    parser.add_argument("--store-share", type=float, default=0.5, help="stores among requests")
    parser.add_argument("--facts", type=int, default=50_000, help="distinct texts to store")
    parser.add_argument(
        "--variant", choices=sorted(VARIANTS), action="append",
        help="run only this configuration (repeatable; default: both)",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {vars(args)}")
    with tempfile.TemporaryDirectory(prefix="memory-growth-") as name:
        chosen = [n for n in VARIANTS if n in (args.variant or VARIANTS)]
        variants = [Variant(n, VARIANTS[n], Path(name) / n) for n in chosen]
        brokers = []
        try:
            for variant in variants:
                variant.tmp.mkdir()
                brokers.append(EmbeddedBroker(variant.tmp / "broker"))
                variant.url = brokers[-1].start()
            asyncio.run(run(args, variants))
        finally:
            for broker in brokers:
                broker.stop()


if __name__ == "__main__":
    main()
