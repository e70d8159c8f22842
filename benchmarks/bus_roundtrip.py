"""Round trips through the ping processor on the embedded broker: sequential latency, and
throughput with ``--callers`` requests in flight against ``--concurrency`` handlers. Headline:
the processor in its own OS process (``react-mem run ping``); ``--mode both`` adds it in the
load generator's process and event loop (as ``react-mem demo`` runs it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.errors import RequestTimeout
from react_mem.ping.service import PingProcessor
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.runtime import ProcessorEntry, serve
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.ping import PingRequest, PingResponse

Client = RequestResponseClient[PingRequest, PingResponse]
Runs = dict[str, list[float]]
TARGET_P50_MS, TARGET_RPS = 3.0, 2000.0
PROCESSOR_IDS = ("ping-bench", "ping-inproc")
FLOW = """  processor:{id}:
    bench:
      topics: {{request: "request:tg:ping:{id}", response: "response:tg:ping:{id}"}}
"""


def cpu_seconds(pid: int) -> float:  # user + system CPU time so far
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_answered(client: Client, deadline_s: float = 60.0) -> None:
    """Retry pings until the processor has subscribed (requests before that are dropped)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            await client.request(PingRequest(message="ready?"), timeout=0.5)
            return
        except RequestTimeout:
            if time.monotonic() > deadline:
                raise


async def load(client: Client, args: argparse.Namespace) -> tuple[list[float], int, float]:
    """``--total`` requests from ``--callers`` coroutines; unanswered ones count as lost."""
    remaining, latencies, lost = args.total, [], 0

    async def caller() -> None:
        nonlocal remaining, lost
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            try:
                await client.request(PingRequest(message="load"), timeout=args.timeout)
            except RequestTimeout:
                lost += 1
                continue
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(args.callers)))
    return latencies, lost, time.perf_counter() - started


async def measure(transport: Transport, args: argparse.Namespace, pids: dict[str, int]) -> Runs:
    topic = f"ping:{args.proc_id}"
    client: Client = RequestResponseClient(
        transport, f"request:tg:{topic}", f"response:tg:{topic}", PingResponse, subscriber="bench"
    )
    await client.start()
    runs: Runs = {}
    try:
        await wait_answered(client)
        for _ in range(args.warmup):
            await client.request(PingRequest(message="warm-up"))
        for run in range(1, args.runs + 1):
            seq = []
            for n in range(args.requests):
                started = time.perf_counter()
                await client.request(PingRequest(message=f"ping {n}"))
                seq.append((time.perf_counter() - started) * 1000)
            q = statistics.quantiles(seq, n=100)
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            loaded, lost, elapsed = await load(client, args)
            cpu = {n: (cpu_seconds(p) - cpu0[n]) * 1e6 / args.total for n, p in pids.items()}
            row = {"p50_ms": q[49], "p99_ms": q[98], "rps": len(loaded) / elapsed,
                   "load_p50_ms": statistics.median(loaded), "lost": lost}  # fmt: skip
            for key, value in row.items():
                runs.setdefault(key, []).append(value)
            print(f"  [{args.proc_id}] run {run}: sequential p50 {q[49]:.3f} ms, p99 {q[98]:.3f} ms"
                  f" | {row['rps']:,.0f} req/s ({len(loaded)} answered, {lost} lost, "
                  f"in {elapsed:.2f} s; p50 under load "
                  f"{row['load_p50_ms']:.2f} ms) | CPU us/request: "
                  + ", ".join(f"{n} {v:.0f}" for n, v in cpu.items()), flush=True)  # fmt: skip
    finally:
        await client.close()
    return runs


async def separate_process(url: str, flows: Path, args: argparse.Namespace, broker: int) -> Runs:
    args.proc_id = PROCESSOR_IDS[0]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "react_mem.cli", "run", "ping", "--flows", str(flows),
        "-p", url, "--no-metrics", "--concurrency", str(args.concurrency),
        "--id", args.proc_id, "-l", "WARNING",
    )  # fmt: skip
    transport = PulsarTransport(PulsarOptions(url=url))
    await transport.connect()
    try:
        pids = {"client": os.getpid(), "processor": proc.pid, "broker": broker}
        return await measure(transport, args, pids)
    finally:
        await transport.close()
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def in_process(url: str, flows: Path, args: argparse.Namespace, broker: int) -> Runs:
    args.proc_id = PROCESSOR_IDS[1]
    settings = ProcessorSettings(
        id=args.proc_id, pulsar_host=url, metrics=False, concurrency=args.concurrency, flows=flows
    )
    stopping, result = asyncio.Event(), Runs()

    async def ready(transport: Transport) -> None:
        try:
            pids = {"client+processor": os.getpid(), "broker": broker}
            result.update(await measure(transport, args, pids))
        finally:
            stopping.set()

    entry = ProcessorEntry(PingProcessor, settings, MemoryKinds())  # the ping needs no kinds
    await serve([entry], settings, stopping=stopping, ready=ready)
    return result


def summarise(name: str, runs: Runs) -> None:
    med = {k: statistics.median(v) for k, v in runs.items()}
    ok = {True: "PASS", False: "FAIL"}
    print(f"{name}: median of {len(runs['rps'])} runs: p50 {med['p50_ms']:.3f} ms (target <= "
          f"{TARGET_P50_MS:g} ms: {ok[med['p50_ms'] <= TARGET_P50_MS]}), p99 {med['p99_ms']:.3f} "
          f"ms, {med['rps']:,.0f} req/s (target >= {TARGET_RPS:,.0f}: "
          f"{ok[med['rps'] >= TARGET_RPS]}), p50 under load {med['load_p50_ms']:.2f} ms, "
          f"lost {med['lost']:g}")  # fmt: skip
    print("  raw: " + ", ".join(f"{k}={[round(x, 3) for x in v]}" for k, v in runs.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests/run")
    parser.add_argument("--warmup", type=int, default=200, help="sequential warm-up requests")
    parser.add_argument("--total", type=int, default=20000, help="throughput requests/run")
    parser.add_argument("--callers", type=int, default=64, help="concurrent callers")
    parser.add_argument("--concurrency", type=int, default=32, help="processor --concurrency")
    parser.add_argument("--runs", type=int, default=2, help="runs of each measurement")
    parser.add_argument("--timeout", type=float, default=5.0, help="load request timeout, s")
    parser.add_argument("--mode", choices=["separate", "in-process", "both"], default="both")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
          f"{platform.platform()}, Python {platform.python_version()}, pulsar-client "
          f"{version('pulsar-client')}, pulsar-lite {version('pulsar-lite')}")  # fmt: skip
    print("settings: " + ", ".join(f"{k}={v}" for k, v in vars(args).items()))
    modes = {"separate": separate_process, "in-process": in_process}
    chosen = list(modes) if args.mode == "both" else [args.mode]
    with tempfile.TemporaryDirectory(prefix="bus-bench-") as tmp:
        flows = Path(tmp) / "flows.yaml"
        flows.write_text("default:\n" + "".join(FLOW.format(id=i) for i in PROCESSOR_IDS))
        broker = EmbeddedBroker(Path(tmp) / "broker")
        url = broker.start()
        try:
            assert broker._process is not None
            pid = broker._process.pid
            results = {m: asyncio.run(modes[m](url, flows, args, pid)) for m in chosen}
        finally:
            broker.stop()
    print()
    for name, runs in results.items():
        summarise(name, runs)


if __name__ == "__main__":
    main()
