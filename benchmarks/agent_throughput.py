"""Agent throughput with a fast scripted LLM, and whether the memory learner keeps up.

One process, one event loop, as ``react-mem up`` runs it: an embedded broker, the real
agent, the real fact-, episode-, conversation- and working-memory services (edge store in a
temp dir, the ONNX embedder) and the real memory learner, with the scripted text-completion
test double from ``tests/support`` answering every prompt at once (the agent's with a final
answer, the learner's JSON questions with a fact, a summary or a lesson). Every ask has
memory on, a user and a conversation; one in four asks the agent to remember something.

For 1, 8 and 64 concurrent callers (each asking again as soon as it is answered) it prints
asks/s and p50/p99 latency, the learner's trajectories/s over the same window, the backlog
(trajectories published but not yet learned) at the end and its slope over the window's
second half (flat: it did not grow), and how long the learner then took to drain it. At one
caller it also prints the agent's own overhead per ask: the ask's latency less the time the
agent waited for the LLM (``tg_agent_llm_duration_seconds``, bus round trip included).
``--no-learner`` leaves the learner out (the agent as it runs beside a learner in another
process); ``--breakdown`` prints the mean memory recall and each service's handler time;
``--phases`` (one caller) prints the median of each phase of an ask and the event loop's
CPU per ask charged to its owners (``benchmarks/ask_phases.py``); ``--pause`` makes each
caller wait that long after an answer before asking again (a person
reading it), so the work an answer leaves behind (the conversation turn's append) is done
before the next ask instead of overlapping it.

``--layout split`` runs the stack as it is deployed (compose, the chart) but with the
learner in the agent's process, as the overhead target asks: this process holds the agent
and the learner; each memory service, the scripted LLM and the caller (TrustGraph's side,
which decodes the agent's replies) run in child processes over the same embedded broker
(``benchmarks/split_layout.py``). It prints the same figures, and every other process's
CPU per ask; ``one`` (the default) is the one-process stack above.

    OMP_NUM_THREADS=1 python benchmarks/agent_throughput.py
    OMP_NUM_THREADS=1 python benchmarks/agent_throughput.py --callers 1 --no-learner --breakdown
    OMP_NUM_THREADS=1 python benchmarks/agent_throughput.py --seconds 10 --callers 64
    OMP_NUM_THREADS=1 python benchmarks/agent_throughput.py --profile learner.prof
    OMP_NUM_THREADS=1 python benchmarks/agent_throughput.py --callers 1 --phases
    OMP_NUM_THREADS=1 python benchmarks/agent_throughput.py --callers 1 --phases --layout split
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_load import ask_loop, overheads, script
from ask_phases import Phases
from prometheus_client import CollectorRegistry
from split_layout import Children, cpu_seconds, merged

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.learner.settings import LearnerSettings
from tests.support.agent_stack import Stack, agent_stack, trajectory_queue

TARGET_OVERHEAD_P50_MS = 15.0


@dataclass
class Level:
    callers: int
    latencies: list[float] = field(default_factory=list)
    overheads: list[float] = field(default_factory=list)
    #: (seconds since start, asks answered, trajectories learned)
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    seconds: float = 0.0
    drain: float = 0.0
    #: CPU seconds the process used over the window (every thread: agent, services,
    #: learner, broker client), which a loaded machine does not inflate as it does latency.
    cpu: float = 0.0
    #: CPU seconds of the event loop's thread alone (where the agent, the services'
    #: handlers and the learner run; the embedder and the broker client have threads).
    loop_cpu: float = 0.0
    #: CPU seconds of the other processes over the window: the broker's, and in the split
    #: layout each child's (by role).
    others: dict[str, float] = field(default_factory=dict)
    #: Each ask's (start, end), on the perf_counter clock.
    spans: list[tuple[float, float]] = field(default_factory=list)


class Probe:
    """Reads the stack's metrics: LLM waits and answers (agent), trajectories learned
    (learner).

    Straight from the metric children: ``registry.get_sample_value`` collects the whole
    registry, which at hundreds of calls a second would be most of what is measured. Each
    LLM wait the agent observes is also stamped with the time it ended, so an ask timed in
    another process (the split layout's caller) finds the waits within it."""

    def __init__(self, stack: Stack, registry: CollectorRegistry, *, learner: bool) -> None:
        families = registry._names_to_collectors
        self._answered = stack.agent.metrics.sessions.labels(
            processor=stack.agent.id, outcome="completed"
        )
        llm = families["tg_agent_llm_duration_seconds"].labels(processor=stack.agent.id)  # type: ignore[attr-defined]
        self.llm_waits: list[tuple[float, float]] = []
        observe = llm.observe

        def stamped(amount: float, *args: Any) -> None:
            self.llm_waits.append((time.perf_counter(), amount))
            observe(amount, *args)

        llm.observe = stamped
        processed = families["tg_consumer_processing"]
        queue = trajectory_queue(stack.unique)
        self._learned = [
            processed.labels(processor=stack.others[0].id, consumer=queue, status=s)  # type: ignore[attr-defined]
            for s in ("ok", "error")
            if learner
        ]

    def answered(self) -> int:
        return int(self._answered._value.get())

    def learned(self) -> int:
        return int(sum(c._value.get() for c in self._learned))


class Layout:
    """Where the callers run: in this process (``one``) or in a child (``split``), and the
    CPU of the processes besides this one."""

    def __init__(self, stack: Stack, broker: int | None, children: Children | None) -> None:
        self.stack, self.broker, self.children = stack, broker, children

    async def asks(
        self, callers: int, seconds: float, base: int, args: argparse.Namespace
    ) -> list[tuple[float, float]]:
        if self.children is None:
            return await ask_loop(
                self.stack.ask, callers, seconds, base, pause=args.pause, timeout=args.timeout
            )
        window = ("window", callers, seconds, base, args.pause, args.timeout)
        return list(await self.children.call("caller", window, timeout=seconds + 600))

    def cpu(self) -> dict[str, float]:
        found = {"broker": cpu_seconds(self.broker)} if self.broker else {}
        return found | (self.children.cpu() if self.children is not None else {})


async def run_level(
    layout: Layout, probe: Probe, callers: int, seconds: float, base: int, args: argparse.Namespace
) -> Level:
    level = Level(callers)
    learned0, answered0 = probe.learned(), probe.answered()
    waits0 = len(probe.llm_waits)
    began, cpu0, loop0 = time.perf_counter(), time.process_time(), time.thread_time()
    others0 = layout.cpu()

    async def sampler() -> None:
        while True:
            level.samples.append(
                (
                    time.perf_counter() - began,
                    probe.answered() - answered0,
                    probe.learned() - learned0,
                )
            )
            await asyncio.sleep(0.5)

    sampling = asyncio.create_task(sampler())
    spans = await layout.asks(callers, seconds, base, args)
    sampling.cancel()
    level.seconds = time.perf_counter() - began
    level.cpu = time.process_time() - cpu0
    level.loop_cpu = time.thread_time() - loop0
    level.others = {k: v - others0[k] for k, v in layout.cpu().items()}
    level.spans = spans
    level.latencies = [end - start for start, end in spans]
    if callers == 1:  # nothing else waits on the LLM meanwhile
        level.overheads = overheads(spans, probe.llm_waits[waits0:])
    answered = len(spans)
    level.samples.append((level.seconds, answered, probe.learned() - learned0))
    drain_began = time.perf_counter()
    while args.learner and probe.learned() - learned0 < answered:
        if time.perf_counter() - drain_began > args.drain_limit:
            break
        await asyncio.sleep(0.05)
    level.drain = time.perf_counter() - drain_began
    return level


def backlog_slope(samples: list[tuple[float, int, int]]) -> float:
    """Backlog growth per second over the second half of the window (least squares)."""
    end = samples[-1][0]
    half = [(t, a - lrn) for t, a, lrn in samples if t >= end / 2]
    if len(half) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in half)
    mean_b = statistics.fmean(b for _, b in half)
    var = sum((t - mean_t) ** 2 for t, _ in half)
    return sum((t - mean_t) * (b - mean_b) for t, b in half) / var if var else 0.0


def q(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))] * 1000


def report(level: Level, *, learner: bool) -> bool:
    asks = len(level.latencies)
    rate = asks / level.seconds
    _, answered, learned = level.samples[-1]
    slope = backlog_slope(level.samples)
    flat = slope <= max(0.2, 0.05 * rate) or not learner
    line = (
        f"{level.callers:>3} callers: {rate:6.1f} asks/s, p50 {q(level.latencies, 50):6.1f} ms, "
        f"p99 {q(level.latencies, 99):6.1f} ms ({asks} asks)"
    )
    if learner:
        line += (
            f" | learner {learned / level.seconds:6.1f} trajectories/s, backlog at end "
            f"{answered - learned}, slope {slope:+.2f}/s ({'flat' if flat else 'GROWING'}), "
            f"drained in {level.drain:.1f} s"
        )
    print(line, flush=True)
    print(
        f"    CPU per ask (whole stack, learner included): process "
        f"{level.cpu / asks * 1000:.1f} ms, event-loop thread {level.loop_cpu / asks * 1000:.1f} ms"
    )
    if level.others:
        shown = ", ".join(f"{k} {v / asks * 1000:.1f}" for k, v in level.others.items())
        total = (level.cpu + sum(level.others.values())) / asks * 1000
        print(f"    CPU per ask of the other processes (ms): {shown}; all processes {total:.1f}")
    if level.overheads:
        p50 = statistics.median(level.overheads) * 1000
        verdict = "ok" if p50 <= TARGET_OVERHEAD_P50_MS else "over target"
        print(
            f"    agent overhead per ask (latency less LLM wait): p50 {p50:.1f} ms, "
            f"p99 {q(level.overheads, 99):.1f} ms (target p50 <= {TARGET_OVERHEAD_P50_MS:g} ms: "
            f"{verdict})",
            flush=True,
        )
    return flat


#: Histograms the breakdown reads: (metric, label naming the part).
BREAKDOWN = (
    ("tg_agent_memory_recall_seconds", "processor"),
    ("tg_consumer_request_duration_seconds", "processor"),
    ("tg_downstream_call_duration_seconds", "target_service"),
)


def means(registry: CollectorRegistry) -> dict[tuple[str, str], tuple[float, float]]:
    """(metric, part) -> (sum, count) of the breakdown's histograms, now."""
    found: dict[tuple[str, str], tuple[float, float]] = {}
    for family in registry.collect():
        for metric, label in BREAKDOWN:
            if family.name != metric.removesuffix("_seconds") and family.name != metric:
                continue
            for sample in family.samples:
                kind = sample.name.rsplit("_", 1)[-1]
                if kind not in ("sum", "count"):
                    continue
                key = (metric, sample.labels.get(label, "?"))
                total, count = found.get(key, (0.0, 0.0))
                if kind == "sum":
                    found[key] = (total + sample.value, count)
                else:
                    found[key] = (total, count + sample.value)
    return found


def breakdown(
    before: dict[tuple[str, str], tuple[float, float]],
    after: dict[tuple[str, str], tuple[float, float]],
) -> None:
    """Mean per call over the level, of each part that ran during it."""
    for (metric, part), (total, count) in sorted(after.items()):
        total0, count0 = before.get((metric, part), (0.0, 0.0))
        if count > count0:
            mean = (total - total0) / (count - count0) * 1000
            print(f"    {metric} {part}: mean {mean:.2f} ms ({count - count0:.0f})", flush=True)


async def bench(url: str, root: Path, broker: int | None, args: argparse.Namespace) -> bool:
    transport = PulsarTransport(PulsarOptions(url=url))
    await transport.connect()
    registry = CollectorRegistry()
    # The test stack gives every processor concurrency 4; the learner runs with its own.
    default = LearnerSettings.model_fields["concurrency"].default
    learner: dict[str, Any] = {"concurrency": args.learner_concurrency or default}
    all_flat = True
    phases = Phases() if args.phases else None
    if phases is not None:
        phases.install(Stack)
    unique = uuid.uuid4().hex[:10]
    split = args.layout == "split"
    children = (
        Children(
            url, root, unique, playbook=args.playbook, phases=args.phases, profile=args.profile
        )
        if split
        else None
    )
    try:
        if children is not None:
            await children.start()
        async with agent_stack(
            transport,
            root,
            unique,
            script=None if split else script,
            running=() if split else None,
            learner=args.learner,
            agent_settings={"concurrency": args.agent_concurrency},
            learner_settings=learner,
            registry=registry,
            playbook=PlaybookMemoryProcessor if args.playbook else None,
        ) as stack:
            probe = Probe(stack, registry, learner=args.learner)
            layout = Layout(stack, broker, children)
            await run_level(layout, probe, 4, args.warmup, 0, args)  # embedder, stores, queues
            for n, callers in enumerate(args.callers, 1):
                before = means(registry) if args.breakdown else {}
                if phases is not None:
                    phases.reset()
                    if children is not None:
                        await children.each(("reset",))
                level = await run_level(layout, probe, callers, args.seconds, n, args)
                all_flat = report(level, learner=args.learner) and all_flat
                if phases is not None and callers == 1:
                    asks = len(level.latencies)
                    if children is not None:  # the caller's stamps, on the same clock
                        phases.add_asks(sorted(level.spans))
                    phases.report(asks)
                    if children is not None:
                        title = "other processes' event-loop CPU per ask by owner"
                        phases.report_cpu(title, merged(await children.each(("cpu",))), asks)
                        handled = dict(phases.handled)
                        for got in (await children.each(("handled",))).values():
                            handled |= got
                        phases.report_handled(handled, asks)
                    else:
                        phases.report_handled(phases.handled, asks)
                if args.breakdown:
                    breakdown(before, means(registry))
    finally:
        if children is not None:
            children.stop()
        await transport.close()
    return all_flat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="load window per level")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of warm-up asks")
    parser.add_argument(
        "--agent-concurrency", type=int, default=4, help="agent --concurrency (the stack's: 4)"
    )
    parser.add_argument(
        "--learner-concurrency", type=int, default=None, help="default: the learner's own"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="caller's wait per ask")
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds a caller waits between asks"
    )
    parser.add_argument("--drain-limit", type=float, default=300.0, help="longest drain wait, s")
    parser.add_argument(
        "--playbook",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run playbook-memory, so the learner reflects and curates (as the stack does)",
    )
    parser.add_argument(
        "--learner",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the memory learner in this process too",
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="print mean recall and per-service times"
    )
    parser.add_argument(
        "--phases", action="store_true", help="one caller: each phase's median, loop CPU by owner"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write cProfile stats here (split: each child's in PATH.<role>)",
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the broker's and stores' files here"
    )
    parser.add_argument(
        "--layout",
        choices=("one", "split"),
        default="one",
        help="one: the whole stack in this process; split: the agent and the learner here, "
        "each memory service, the LLM and the caller in child processes (split_layout.py)",
    )
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
        f"Python {platform.python_version()}, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"
    )
    print("settings: " + ", ".join(f"{k}={v}" for k, v in vars(args).items()), flush=True)
    # The loop thread's CPU time: what competes with the agent, not inflated by a busy machine.
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    kept = contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory()
    with kept as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        if profiler is not None:
            profiler.enable()
        flat = asyncio.run(bench(broker.url, Path(tmp), broker.pid, args))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
    if args.learner:
        print(f"learner kept up at every level: {'yes' if flat else 'no'}")


if __name__ == "__main__":
    main()
