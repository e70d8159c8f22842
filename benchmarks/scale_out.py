"""Scale-out on RabbitMQ: asks/s with 1, 2 and 4 processes of the agent sharing its queues,
then a replica killed with -9 mid-load (messages lost, answers duplicated).

A private RabbitMQ node (``tests/support/rabbitmq.py``: the rabbitmq-server package), a fast
scripted LLM in its own process (this module's :class:`FastLLM`: every prompt answered at once
with a final answer), and N ``react-mem run agent-mem`` processes with the same id, so they
share the request queue ``tg.request.agent-….{id}--default--f1--request`` as competing
consumers (prefetch = ``--concurrency``). The agent runs without memory services (no store
to share): what scales here is the agent's own work per ask — decode, prompt, LLM round
trip, parse, answer stream. This process drives the load: ``--callers`` closed-loop callers
(each asks again as soon as it is answered) over one RabbitMQ connection, counting every
final answer per request id on the response exchange.

Each line also gives the CPU time the agent and LLM processes spent per ask and the load
average: on a shared machine other work takes cores too, and asks/s is bounded by the cores
free divided by the CPU per ask (plus the broker's and this driver's share).

The kill run: 2 replicas under the same load; half way through one is killed with SIGKILL.
RabbitMQ hands its unacknowledged requests to the survivor. Lost: asks never answered (after
a drain of ``--drain`` seconds); duplicated: asks whose final answer went out twice on the
bus. Delivery is at least once: a replica killed after answering but before acknowledging
the request (the framework acknowledges when the handler returns, after the agent's
post-answer work) has it answered again by the survivor. Callers see one answer: react-mem's
and TrustGraph's request/response clients drop an answer for an id already answered.
``--kills`` repeats the kill run.

    python benchmarks/scale_out.py
    python benchmarks/scale_out.py --replicas 1 2 --seconds 10 --callers 32
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aio_pika

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.bus.queues import Queue
from react_mem.bus.rabbitmq import RabbitMQTransport, queue_name
from react_mem.schema import AgentRequest, AgentResponse, TextCompletionRequest
from tests.support.rabbitmq import RabbitMQNode
from tests.support.scripted_llm import ScriptedLLM

REPO = Path(__file__).resolve().parents[1]
AGENT_ID = "agent-bench"
#: The subscriptions of the agent's and the LLM's request queues.
AGENT, LLM = f"{AGENT_ID}--default--f1--request", "llm-bench--default--f1--request"
ANSWER = "Thought: I know this\nFinal Answer: Lisbon."


class FastLLM(ScriptedLLM):
    """The scripted text-completion double, answering every prompt at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.script = self.answer

    @staticmethod
    def answer(_: TextCompletionRequest) -> str:
        return ANSWER


def topics(unique: str) -> dict[str, dict[str, str]]:
    return {
        name: {
            "request": f"request:tg:{name}-{unique}:default:f1",
            "response": f"response:tg:{name}-{unique}:default:f1",
        }
        for name in ("agent", "text-completion", "graph-rag")
    }


def write_flows(base: Path, unique: str) -> tuple[Path, Path]:
    t = topics(unique)
    agent = {
        "request": t["agent"]["request"],
        "next": t["agent"]["request"],
        "response": t["agent"]["response"],
        **{f"{n}-{kind}": t[n][kind] for n in ("text-completion", "graph-rag") for kind in t[n]},
    }
    agent_flows = base / "agent-flows.yaml"
    agent_flows.write_text(
        json.dumps(
            {
                "default": {
                    f"processor:{AGENT_ID}": {"f1": {"topics": agent, "parameters": {}}},
                    "agent-mem": {},
                    "tool": {},
                }
            }
        )
    )
    llm_flows = base / "llm-flows.yaml"
    llm_flows.write_text(
        json.dumps({"default": {"processor:llm-bench": {"f1": {"topics": t["text-completion"]}}}})
    )
    return agent_flows, llm_flows


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of ``pids`` so far (Linux ``/proc``)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def node_pids(node: RabbitMQNode) -> list[int]:
    """The node's processes (its process group: the launcher script, beam and helpers)."""
    group = node.group
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == group:
                pids.append(int(stat.parent.name))
    return pids


class Processes:
    """``react-mem run`` subprocesses on the node, each with its own state directory."""

    def __init__(self, node: RabbitMQNode, base: Path, key: str) -> None:
        self.node, self.base, self.key = node, base, key
        self.running: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        processor: str,
        pid: str,
        flows: Path,
        concurrency: int,
        *,
        env: dict[str, str] | None = None,
        state: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """``env``: more environment (settings as ``REACT_MEM_*``); ``state``: the state
        directory's name (default: one per process started)."""
        state_dir = self.base / (state or f"state-{len(self.running)}")
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "react_mem.cli", "run", processor,
                "--id", pid, "--flows", str(flows), "--concurrency", str(concurrency),
                "--pubsub-backend", "rabbitmq", "--rabbitmq-host", "127.0.0.1",
                "--rabbitmq-port", str(self.node.port), "--no-metrics",
                "--state-dir", str(state_dir), "--log-level", "ERROR",
            ],
            cwd=REPO,
            env=os.environ
            | {"REACT_MEM_MEMORY_STATE_KEY": self.key, "OMP_NUM_THREADS": "1"}
            | (env or {}),
            stdout=subprocess.DEVNULL,
            stderr=(self.base / f"proc-{len(self.running)}.log").open("wb"),
        )  # fmt: skip
        self.running.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.running:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.running.clear()


class Driver:
    """Requests with their final replies counted per id; callers wait for the first."""

    def __init__(self, bus: RabbitMQTransport, queues: dict[str, str]) -> None:
        self.bus, self.queues = bus, queues
        self.finals: Counter[str] = Counter()
        self.waiting: dict[str, asyncio.Future[bytes]] = {}
        self.sent: list[str] = []
        self.latencies: list[float] = []

    def final(self, data: bytes) -> bool:
        """Whether a reply ends its request (the agent streams several, the last one ends)."""
        return AgentResponse.decode(data).end_of_dialog

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.producer = await self.bus.producer(Queue.parse(self.queues["request"]))
        consumer = await self.bus.consumer(
            Queue.parse(self.queues["response"]), f"bench-{uuid.uuid4().hex[:8]}"
        )

        async def listen() -> None:
            while True:
                delivery = await consumer.receive()
                await consumer.ack(delivery)
                rid = delivery.properties.get("id", "")
                if self.final(delivery.data):
                    self.finals[rid] += 1
                    future = self.waiting.pop(rid, None)
                    if future is not None and not future.done():
                        future.set_result(delivery.data)

        listener = asyncio.create_task(listen())
        try:
            yield
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await consumer.close()
            await self.producer.close()

    async def request(self, body: bytes, timeout: float) -> bytes | None:
        """Send ``body`` with a new id; its first final reply, or None after ``timeout``."""
        rid = str(uuid.uuid4())
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = future
        self.sent.append(rid)
        started = time.monotonic()
        await self.producer.send(body, {"id": rid})
        try:
            reply = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return None
        self.latencies.append(time.monotonic() - started)
        return reply

    async def ask(self, timeout: float) -> bool:
        body = AgentRequest(question="Capital of Portugal?").encode()
        return await self.request(body, timeout) is not None

    async def load(self, callers: int, seconds: float, timeout: float = 60.0) -> int:
        """Asks answered within ``seconds`` by ``callers`` closed-loop callers."""
        stop = time.monotonic() + seconds
        answered = 0

        async def caller() -> None:
            nonlocal answered
            while time.monotonic() < stop:
                if await self.ask(timeout) and time.monotonic() <= stop:
                    answered += 1

        await asyncio.gather(*(caller() for _ in range(callers)))
        return answered


async def until_ready(node: RabbitMQNode, unique: str, replicas: int) -> None:
    """Until the LLM and ``replicas`` agent processes consume their request queues (a
    slow start would otherwise leave one replica doing the work of two)."""
    t = topics(unique)
    await until_consumed(node, queue_name(Queue.parse(t["text-completion"]["request"]), LLM), 1)
    await until_consumed(node, queue_name(Queue.parse(t["agent"]["request"]), AGENT), replicas)


async def until_consumed(node: RabbitMQNode, queue: str, consumers: int) -> None:
    connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{node.port}/")
    deadline = time.monotonic() + 180.0
    try:
        while True:
            channel = await connection.channel()
            try:
                declared = await channel.declare_queue(queue, passive=True)
                result = declared.declaration_result
                if (result.consumer_count or 0) >= consumers:
                    return
            except aio_pika.exceptions.ChannelClosed:
                pass  # not declared yet
            finally:
                if not channel.is_closed:
                    await channel.close()
            if time.monotonic() > deadline:
                raise SystemExit(f"{queue}: {consumers} consumer(s) never came (proc-*.log)")
            await asyncio.sleep(0.5)
    finally:
        await connection.close()


Measure = Callable[[argparse.Namespace, RabbitMQNode, Path, "Processes"], Awaitable[None]]


async def on_a_node(args: argparse.Namespace, measure: Measure, prefix: str) -> None:
    """``measure`` with a private RabbitMQ node and the processes it starts, then cleaned up."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        base = Path(tmp)
        node = RabbitMQNode(base / "rabbitmq")
        await asyncio.to_thread(node.start)
        processes = Processes(node, base, secrets.token_hex(32))
        try:
            await measure(args, node, base, processes)
        finally:
            processes.stop()
            await asyncio.to_thread(node.shutdown)


async def measure(
    args: argparse.Namespace, node: RabbitMQNode, base: Path, processes: Processes
) -> None:
    machine = platform.processor() or platform.machine()
    print(
        f"scale-out on RabbitMQ: {os.cpu_count()} CPUs ({machine}), {args.callers} callers,"
        f" {args.seconds:.0f}s per run, agent --concurrency {args.concurrency}"
    )
    rows = []
    for replicas in args.replicas:
        unique = uuid.uuid4().hex[:8]
        agent_flows, llm_flows = write_flows(base, unique)
        processes.start("benchmarks.scale_out.FastLLM", "llm-bench", llm_flows, 256)
        for _ in range(replicas):
            processes.start("agent-mem", AGENT_ID, agent_flows, args.concurrency)
        bus = node.transport(prefetch=1000)
        await bus.connect()
        driver = Driver(bus, topics(unique)["agent"])
        try:
            async with driver.running():
                await until_ready(node, unique, replicas)
                await driver.load(args.callers, 2.0)  # warm-up
                driver.latencies.clear()
                groups = {
                    "agents+LLM": [proc.pid for proc in processes.running],
                    "broker": node_pids(node),
                    "driver": [os.getpid()],
                }
                before = {k: cpu_seconds(v) for k, v in groups.items()}
                load = os.getloadavg()[0]
                answered = await driver.load(args.callers, args.seconds)
                per_ask = {
                    k: (cpu_seconds(v) - before[k]) / max(answered, 1) * 1000
                    for k, v in groups.items()
                }
                p50 = statistics.median(driver.latencies) * 1000
                rate = answered / args.seconds
                rows.append((replicas, rate, p50))
                print(
                    f"  {replicas} agent process(es): {rate:7.1f} asks/s, p50 {p50:6.1f} ms;"
                    " CPU ms per ask: "
                    + ", ".join(f"{k} {v:.1f}" for k, v in per_ask.items())
                    + f"; load average {load:.1f}"
                )
        finally:
            await bus.close()
            processes.stop()
    base_rate = rows[0][1]
    print("  scaling vs 1 process: " + ", ".join(f"{n}: {r / base_rate:.2f}x" for n, r, _ in rows))
    for _ in range(args.kills):
        await kill_run(args, node, base, processes)


async def kill_run(
    args: argparse.Namespace, node: RabbitMQNode, base: Path, processes: Processes
) -> None:
    unique = uuid.uuid4().hex[:8]
    agent_flows, llm_flows = write_flows(base, unique)
    processes.start("benchmarks.scale_out.FastLLM", "llm-bench", llm_flows, 256)
    replicas = [
        processes.start("agent-mem", AGENT_ID, agent_flows, args.concurrency) for _ in range(2)
    ]
    bus = node.transport(prefetch=1000)
    await bus.connect()
    driver = Driver(bus, topics(unique)["agent"])
    try:
        async with driver.running():
            await until_ready(node, unique, 2)
            await driver.load(args.callers, 2.0)  # warm-up
            driver.sent.clear()
            driver.finals.clear()

            async def kill_half_way() -> None:
                await asyncio.sleep(args.seconds / 2)
                replicas[0].send_signal(signal.SIGKILL)

            killer = asyncio.create_task(kill_half_way())
            answered = await driver.load(args.callers, args.seconds, timeout=args.drain)
            await killer
            await asyncio.sleep(1.0)  # late duplicates would arrive by now
            lost = sum(1 for rid in driver.sent if driver.finals[rid] == 0)
            duplicated = sum(1 for rid in driver.sent if driver.finals[rid] > 1)
            print(
                f"  kill -9 of 1 of 2 replicas half way: {len(driver.sent)} asks ({answered}"
                f" answered in the window), lost {lost}, answered twice on the bus {duplicated}"
            )
    finally:
        await bus.close()
        processes.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--drain", type=float, default=60.0, help="seconds an ask may take")
    parser.add_argument("--kills", type=int, default=3, help="kill runs")
    asyncio.run(on_a_node(parser.parse_args(), measure, "scale-out-"))


if __name__ == "__main__":
    main()
