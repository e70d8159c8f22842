"""Memory of one fact-memory service over load rounds: does it flatten?

The service runs in its own OS process on an embedded broker (as in ``fact_memory.py``).
Each round sends ``--seconds`` of load from ``--callers`` concurrent clients: stores of new
facts (texts of varied lengths) and retrievals, over ``--users`` users in ``--collections``
collections. After each round it prints the service's RSS split into anonymous memory (the
heap: Python, the engine's in-RAM structures, ONNX Runtime) and file-backed pages (mapped
shard files: page cache the kernel can take back), and the store's size on disk.

    OMP_NUM_THREADS=1 python benchmarks/memory_growth.py --rounds 4 --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import tempfile
import time
from pathlib import Path

from fact_memory import Client, Service, corpus, questions

from memory_services.facts.schema import FactInput, FactRequest
from react_mem.bus.embedded import EmbeddedBroker


def memory(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of a process, in MiB."""
    wanted = {"VmRSS", "RssAnon", "RssFile", "VmHWM"}
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            out[key] = int(value.split()[0]) / 1024
    return out


#: What a mapped file of a shard holds, by a part of its path (the first that matches).
KINDS = (("/wal/", "wal"), ("vector_storage", "vectors"), ("payload", "payload"),
         ("/segments/", "other shard files"), (".so", "libraries"))  # fmt: skip


def mapped(pid: int) -> dict[str, float]:
    """Resident MiB of the process's file mappings by kind (from ``/proc/<pid>/smaps``)."""
    out: dict[str, float] = {}
    kind = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            path = fields[5] if len(fields) > 5 else ""
            kind = next((k for part, k in KINDS if part in path), None) if path else None
        elif kind and fields[0] == "Rss:":
            out[kind] = out.get(kind, 0.0) + int(fields[1]) / 1024
    return out


def disk_mib(path: Path) -> float:
    """Blocks in use (files are sparse: their sizes say more)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) / 2**20


async def load_round(
    client: Client, args: argparse.Namespace, texts: itertools.cycle[str], asked: list[str]
) -> tuple[int, int]:
    """``args.seconds`` of load from ``args.callers`` callers; (stores, retrievals) done."""
    rng, deadline = random.Random(), time.monotonic() + args.seconds
    done = [0, 0]

    async def caller() -> None:
        while time.monotonic() < deadline:
            user = f"user-{rng.randrange(args.users)}"
            collection = f"c{rng.randrange(args.collections)}"
            if rng.random() < args.store_share:
                facts = [FactInput(content=next(texts)) for _ in range(rng.randint(1, 4))]
                request = FactRequest(
                    operation="store", collection=collection, user=user, facts=facts
                )
            else:
                request = FactRequest(
                    operation="retrieve", collection=collection, user=user,
                    query=rng.choice(asked), top_k=5,
                )  # fmt: skip
            reply = await client.request(request)
            assert reply.error is None, reply.error
            done[request.operation == "retrieve"] += 1

    await asyncio.gather(*(caller() for _ in range(args.callers)))
    return done[0], done[1]


async def run(args: argparse.Namespace, url: str, tmp: Path) -> None:
    texts = itertools.cycle(corpus(args.facts))
    asked = questions(500)
    data_dir = tmp / "store"
    await rounds(Service(url, tmp, data_dir), args, texts, asked, "fresh", args.rounds)
    await rounds(Service(url, tmp, data_dir), args, texts, asked, "restarted on that state", 1)


async def rounds(
    service: Service,
    args: argparse.Namespace,
    texts: itertools.cycle[str],
    asked: list[str],
    label: str,
    count: int,
) -> None:
    data_dir = service.data_dir
    async with service as client:
        assert service.proc is not None
        pid = service.proc.pid
        first = memory(pid)
        files = ", ".join(f"{k} {v:.0f}" for k, v in sorted(mapped(pid).items()))
        print(f"{label}: RSS {first['VmRSS']:.0f} MiB (anon {first['RssAnon']:.0f}, "
              f"file {first['RssFile']:.0f}: {files})", flush=True)  # fmt: skip
        previous = first
        for n in range(1, count + 1):
            stores, retrievals = await load_round(client, args, texts, asked)
            now = memory(pid)
            print(
                f"round {n}: {stores} stores, {retrievals} retrievals; RSS {now['VmRSS']:.0f} MiB "
                f"(anon {now['RssAnon']:.0f}, file {now['RssFile']:.0f}; "
                f"{now['VmRSS'] - previous['VmRSS']:+.0f} this round), peak "
                f"{now['VmHWM']:.0f}; store on disk {disk_mib(data_dir):.0f} MiB",
                flush=True,
            )
            files = ", ".join(f"{k} {v:.0f}" for k, v in sorted(mapped(pid).items()))
            print(f"  resident file mappings (MiB): {files}", flush=True)
            previous = now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30, help="length of a load round")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--collections", type=int, default=4)
    parser.add_argument("--store-share", type=float, default=0.5, help="stores among requests")
    parser.add_argument("--facts", type=int, default=50_000, help="distinct texts to store")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {vars(args)}")
    with tempfile.TemporaryDirectory(prefix="memory-growth-") as name:
        tmp = Path(name)
        broker = EmbeddedBroker(tmp / "broker")
        url = broker.start()
        try:
            asyncio.run(run(args, url, tmp))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
