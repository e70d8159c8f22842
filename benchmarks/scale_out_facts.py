"""Scale-out of fact memory on RabbitMQ: retrievals/s with 1, 2 and 4 partitioned replicas,
then a replica killed with -9 mid-load and restarted (requests lost, answered twice).

There is no Qdrant server to install on this machine, and an embedded store has one owner
process, so the replicas split the owners instead of sharing a store: replica ``i`` of ``n``
runs ``fact-memory`` with its own id, state directory and embedded store and ``partition
i/n`` (:mod:`memory_services.partition`); every replica receives every request (its own
subscription) and serves the owners that hash to it. ``--users`` owners get ``--facts``
facts each through the bus (real embeddings, one thread per process), then ``--callers``
closed-loop callers retrieve (top 5, hybrid) for random owners for ``--seconds``; each
reply is counted per request id on the response exchange.

The kill run: 2 replicas under load; half way through one is killed with SIGKILL and
started again on its store (as an orchestrator restarts a pod). Its owners' requests wait
in its durable queue meanwhile. Lost: requests never answered within ``--drain`` seconds;
answered twice: requests with two replies on the bus (a replica killed after replying and
before acknowledging answers again when it is back; callers keep the first).

    python benchmarks/scale_out_facts.py
    python benchmarks/scale_out_facts.py --replicas 1 2 --seconds 10 --kills 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scale_out import (
    Driver,
    Processes,
    cpu_seconds,
    node_pids,
    on_a_node,
    until_consumed,
)
from react_mem.bus.queues import Queue
from react_mem.bus.rabbitmq import queue_name
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.rabbitmq import RabbitMQNode

SUBJECTS = ("Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun")
THINGS = ("a red bicycle", "two cats", "a sourdough starter", "a flat in Porto", "a kayak")
VERBS = ("owns", "wants", "sold", "borrowed", "photographed", "repaired")


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(THINGS)} in {rng.randint(1990, 2025)}."  # noqa: E501


def topics(unique: str) -> dict[str, str]:
    return {
        "request": f"request:tg:fact-memory-{unique}:default:f1",
        "response": f"response:tg:fact-memory-{unique}:default:f1",
        "audit": f"flow:tg:memory-audit-{unique}:default:f1",
    }


def replica_id(unique: str, i: int) -> str:
    return f"fact-bench-{unique}-p{i}"


def write_flows(base: Path, unique: str, replicas: int) -> Path:
    path = base / f"facts-{unique}.yaml"
    entries = {
        f"processor:{replica_id(unique, i)}": {"f1": {"topics": topics(unique), "parameters": {}}}
        for i in range(replicas)
    }
    path.write_text(json.dumps({"default": entries}))
    return path


class FactDriver(Driver):
    """Every reply of fact memory ends its request."""

    def final(self, data: bytes) -> bool:
        return True

    async def fact(self, request: FactRequest, timeout: float) -> FactResponse | None:
        reply = await self.request(request.encode(), timeout)
        if reply is None:
            return None
        response = FactResponse.decode(reply)
        if response.error is not None:
            raise SystemExit(f"fact-memory answered an error: {response.error}")
        return response

    async def seed(self, users: int, facts: int, rng: random.Random) -> None:
        """``facts`` facts for each of ``users`` owners, in batches of 16, 8 at a time."""
        batches = [
            FactRequest(
                operation="store",
                user=f"user-{u}",
                facts=[FactInput(content=sentence(rng)) for _ in range(min(16, facts - start))],
            )
            for u in range(users)
            for start in range(0, facts, 16)
        ]
        gate = asyncio.Semaphore(8)

        async def one(request: FactRequest) -> None:
            async with gate:
                if await self.fact(request, 300.0) is None:
                    raise SystemExit("a store request was not answered in 300 s")

        await asyncio.gather(*(one(b) for b in batches))

    async def load(
        self, callers: int, seconds: float, users: int, rng: random.Random, timeout: float
    ) -> int:
        """Retrievals answered within ``seconds`` by ``callers`` closed-loop callers."""
        stop = time.monotonic() + seconds
        answered = 0

        async def caller() -> None:
            nonlocal answered
            while time.monotonic() < stop:
                request = FactRequest(
                    operation="retrieve",
                    user=f"user-{rng.randrange(users)}",
                    query=f"What does {rng.choice(SUBJECTS)} have?",
                    top_k=5,
                )
                if await self.fact(request, timeout) is not None and time.monotonic() <= stop:
                    answered += 1

        await asyncio.gather(*(caller() for _ in range(callers)))
        return answered


class Layout:
    """``n`` partitioned fact-memory replicas on one flow."""

    def __init__(self, processes: Processes, base: Path, n: int) -> None:
        self.processes, self.n, self.unique = processes, n, uuid.uuid4().hex[:8]
        self.flows = write_flows(base, self.unique, n)
        self.procs = [self.start(i) for i in range(n)]

    def start(self, i: int) -> subprocess.Popen[bytes]:
        return self.processes.start(
            "fact-memory",
            replica_id(self.unique, i),
            self.flows,
            4,
            env={"REACT_MEM_PARTITION": f"{i}/{self.n}"},
            state=f"state-{self.unique}-{i}",
        )

    async def ready(self, node: RabbitMQNode) -> None:
        request = Queue.parse(topics(self.unique)["request"])
        for i in range(self.n):
            subscription = f"{replica_id(self.unique, i)}--default--f1--request"
            await until_consumed(node, queue_name(request, subscription), 1)


async def measure(
    args: argparse.Namespace, node: RabbitMQNode, base: Path, processes: Processes
) -> None:
    print(
        f"fact-memory scale-out on RabbitMQ: {os.cpu_count()} CPUs, {args.users} owners x"
        f" {args.facts} facts, {args.callers} callers, {args.seconds:.0f}s per run"
    )
    rows = []
    for n in args.replicas:
        layout = Layout(processes, base, n)
        bus = node.transport(prefetch=1000)
        await bus.connect()
        driver = FactDriver(bus, topics(layout.unique))
        rng = random.Random(n)
        try:
            async with driver.running():
                await layout.ready(node)
                started = time.monotonic()
                await driver.seed(args.users, args.facts, rng)
                ingest = args.users * args.facts / (time.monotonic() - started)
                await driver.load(args.callers, 2.0, args.users, rng, 60.0)  # warm-up
                driver.latencies.clear()
                groups = {
                    "replicas": [p.pid for p in processes.running],
                    "broker": node_pids(node),
                    "driver": [os.getpid()],
                }
                before = {k: cpu_seconds(v) for k, v in groups.items()}
                load = os.getloadavg()[0]
                answered = await driver.load(args.callers, args.seconds, args.users, rng, 60.0)
                per = {
                    k: (cpu_seconds(v) - before[k]) / max(answered, 1) * 1000
                    for k, v in groups.items()
                }
                rate, p50 = answered / args.seconds, statistics.median(driver.latencies) * 1000
                rows.append((n, rate))
                print(
                    f"  {n} replica(s): {rate:7.1f} retrievals/s, p50 {p50:6.1f} ms; ingest"
                    f" {ingest:.0f} facts/s; CPU ms per retrieval: "
                    + ", ".join(f"{k} {v:.1f}" for k, v in per.items())
                    + f"; load average {load:.1f}"
                )
        finally:
            await bus.close()
            processes.stop()
    print("  scaling vs 1 replica: " + ", ".join(f"{n}: {r / rows[0][1]:.2f}x" for n, r in rows))
    for _ in range(args.kills):
        await kill_run(args, node, base, processes)


async def kill_run(
    args: argparse.Namespace, node: RabbitMQNode, base: Path, processes: Processes
) -> None:
    layout = Layout(processes, base, 2)
    bus = node.transport(prefetch=1000)
    await bus.connect()
    driver = FactDriver(bus, topics(layout.unique))
    rng = random.Random(99)
    try:
        async with driver.running():
            await layout.ready(node)
            await driver.seed(args.users, args.facts, rng)
            driver.sent.clear()
            driver.finals.clear()

            async def kill_and_restart() -> None:
                await asyncio.sleep(args.seconds / 2)
                victim = layout.procs[0]
                victim.send_signal(signal.SIGKILL)
                await asyncio.to_thread(victim.wait)
                await asyncio.sleep(1.0)
                layout.procs[0] = layout.start(0)

            restart = asyncio.create_task(kill_and_restart())
            await driver.load(args.callers, args.seconds, args.users, rng, args.drain)
            await restart
            await asyncio.sleep(1.0)  # late second replies would arrive by now
            lost = sum(1 for rid in driver.sent if driver.finals[rid] == 0)
            twice = sum(1 for rid in driver.sent if driver.finals[rid] > 1)
            print(
                f"  kill -9 and restart of 1 of 2 replicas half way: {len(driver.sent)}"
                f" retrievals, lost {lost}, answered twice on the bus {twice}"
            )
    finally:
        await bus.close()
        processes.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--facts", type=int, default=20, help="facts per owner")
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--drain", type=float, default=60.0, help="seconds a request may take")
    parser.add_argument("--kills", type=int, default=1, help="kill runs")
    asyncio.run(on_a_node(parser.parse_args(), measure, "scale-out-facts-"))


if __name__ == "__main__":
    main()
