"""Soak: the whole stack under a steady load for a long time; does anything trend upwards?

One process, as ``react-mem up`` runs it: an embedded broker, the real agent, fact-,
episode-, conversation-, working- and playbook-memory, the real memory learner, and the
scripted LLM of ``agent_throughput.py`` (every prompt answered at once). Operations start on
a fixed schedule (``--rate`` a second, not waiting for each other) in a steady mix: asks
(memory on, 12 users, conversations of 5 asks), explicit fact stores, fact retrievals and
conversation ends. Every minute it prints each operation's p50/p99 and count, the learner's
lag (trajectories published, not yet learned), the process's RSS and the stores' size on
disk. At the end it waits for the learner to drain, checks that nothing was lost (every
ask answered, every stored fact there, every trajectory learned) and prints the verdict:
the last five minutes' p50s within 1.2x of the first five's and RSS within 10% (a run
under ten minutes compares its first and last thirds).

    OMP_NUM_THREADS=1 python benchmarks/soak.py                  # 30 minutes
    OMP_NUM_THREADS=1 python benchmarks/soak.py --minutes 1 --rate 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_throughput import Probe, script
from prometheus_client import CollectorRegistry
from soak_life import Workload, forget
from soak_trace import Tracer

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.conversations import ConversationClient
from react_mem.clients.facts import FactClient
from react_mem.processor.runtime import one_malloc_arena
from react_mem.schema.conversations import ConversationResponse
from react_mem.schema.facts import FactInput, FactResponse
from react_mem.schema.scope import Scope
from tests.support.agent_stack import Stack, agent_stack

#: The mix: operation -> share of the schedule (``forget``: steady mode's users leaving,
#: on their own schedule; see soak_life.py).
MIX = {"ask": 0.5, "store": 0.2, "retrieve": 0.2, "end": 0.1}
KINDS = (*MIX, "forget")
PLACES = ("Lisbon", "Osaka", "Bergen", "Krakow", "Montreal", "Tbilisi", "Valparaiso")
PETS = ("tortoise", "parrot", "ferret", "hamster", "rabbit", "kitten", "gecko")
SLOW_RATIO, RSS_RATIO = 1.2, 1.10


def rss_mib(field: str = "VmRSS") -> float:
    """The process's resident memory (``RssAnon``: its heap alone, without the pages of
    files it maps, which the kernel can drop), MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def dropped(port: int) -> dict[str, float]:
    """Per subscription of a response queue (``topic subscription``): what the topic took
    in less what the broker sent the subscription. Every subscription of a response queue
    gets every message and nothing waits at the broker (non-persistent), so that is what
    it dropped (a consumer out of permits: see docs/performance.md, "The soak"), plus what
    was sent before the subscription existed. pulsar-lite's own dropped-messages counter
    misses those drops. (A request queue's Shared subscription is not counted: the agent's
    shows about four a question taken in and not sent, every question answered.)"""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as got:
        text = got.read().decode()
    taken: dict[str, float] = {}
    sent: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition("{")
        if name not in ("pulsar_in_messages_total", "pulsar_out_messages_total"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if not labels.get("namespace", "").endswith("/response"):
            continue
        if labels.get("subscription", "").startswith("react-mem-forget"):
            continue  # a forget's replies: subscribed afresh for each (see soak_life.py)
        value = float(line.rsplit(" ", 1)[1])
        if name == "pulsar_in_messages_total":
            taken[labels["topic"]] = value
        else:
            sent[(labels["topic"], labels.get("subscription", "?"))] = value
    return {f"{t} {s}": taken.get(t, n) - n for (t, s), n in sent.items()}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def disk_mib(root: Path) -> dict[str, float]:
    """MiB on disk per service (its data folder's name less the run's unique suffix)."""
    total: dict[str, float] = defaultdict(float)
    for top in root.iterdir():
        if top.name == "broker" or not top.is_dir():
            continue
        name = top.name.rsplit("-", 1)[0].removesuffix("-memory")
        # os.walk passes over a folder a compaction removes meanwhile (rglob raises).
        for folder, _, files in os.walk(top):
            for file in files:
                try:
                    total[name] += os.stat(os.path.join(folder, file)).st_blocks * 512 / 2**20
                except OSError:
                    continue  # replaced meanwhile
    return dict(total)


class Soak:
    def __init__(
        self, stack: Stack, probe: Probe, root: Path, args: argparse.Namespace, work: Workload
    ) -> None:
        self.stack, self.probe, self.root, self.args, self.work = stack, probe, root, args, work
        #: The broker's metrics port: what it dropped is read from there.
        self.metrics_port = 0
        #: (minute, operation) -> latencies in ms.
        self.took: dict[tuple[int, str], list[float]] = defaultdict(list)
        self.rss: dict[int, float] = {}
        #: minute -> (anon RSS, stores on disk), MiB: what the heap grows by per MiB stored.
        self.grown: dict[int, tuple[float, float]] = {}
        #: (seconds since start, operation, ms) and (seconds since start, RSS MiB), for
        #: the verdict's windows.
        self.timeline: list[tuple[float, str, float]] = []
        self.rss_timeline: list[tuple[float, float]] = []
        self.failed: list[str] = []
        #: Facts stored, with when (a fact past its TTL is gone by design, not lost).
        self.stored: dict[Scope, dict[str, float]] = defaultdict(dict)
        #: Forgets started (steady mode), one at a time.
        self.forgets = self.forgotten = 0
        self.forgetting = asyncio.Lock()
        self.asked = 0
        #: Asks answered without an error: only these leave a trajectory to learn.
        self.answered = 0
        #: The schedule starts a warm-up before the first measured minute.
        self.scheduled = time.perf_counter()
        self.began = self.scheduled + work.warmup
        self.warm = -int(-work.warmup // args.minute)  # warm-up minutes, rounded up
        self.tasks: set[asyncio.Task[None]] = set()
        self.tracer = (
            Tracer(args.trace == "heap", lambda: rss_mib("RssAnon")) if args.trace else None
        )

    def minute(self) -> int:
        """The measured minute now (negative: warming up)."""
        return int((time.perf_counter() - self.began) // self.args.minute)

    async def op(self, kind: str, n: int, facts: FactClient, talks: ConversationClient) -> None:
        _, user, talk = self.work.pick(n, kind)
        scope = Scope("default", "default", user)
        place, pet = PLACES[n % len(PLACES)], PETS[(n // 7) % len(PETS)]
        started, minute = time.perf_counter(), self.minute()
        try:
            if kind == "ask":
                self.asked += 1
                got = await self.stack.ask(
                    f"Can you plan a weekend in {place} with my {pet}?",
                    user=user,
                    conversation_id=talk,
                    timeout=self.args.timeout,
                )
                if got[-1].error is not None:
                    self.failed.append(f"ask: {got[-1].error.message}"[:200])
                    return
                self.answered += 1
            elif kind == "store":
                fact = FactInput(content=f"{user} once took a {pet} to {place} (note {n}).")
                response = await facts.store(scope, [fact])
                self.stored[scope].update((s.id, time.time()) for s in response.stored)
            elif kind == "retrieve":
                await facts.retrieve(scope, f"Where did I take my {pet}?", top_k=5)
            else:
                await talks.end(scope.with_conversation(talk))
        except Exception as exc:  # noqa: BLE001 - counted and reported, the soak goes on
            if kind != "end" or "not-found" not in str(exc):  # ending an unknown one: fine
                self.failed.append(f"{kind}: {exc!r}"[:200])
            return
        self.timed(kind, minute, started)

    def timed(self, kind: str, minute: int, started: float) -> None:
        took = (time.perf_counter() - started) * 1000
        self.took[(minute, kind)].append(took)
        self.timeline.append((started - self.began, kind, took))

    async def leave(self, slot: int) -> None:
        """Slot ``slot``'s user leaves: a new user takes the slot at once; the old one is
        forgotten everywhere a few seconds later (what they had under way lands first)."""
        user = self.work.user(slot)
        self.work.generation[slot] += 1
        await asyncio.sleep(min(5.0, self.args.minute / 12))
        async with self.forgetting:  # forget's replies come on one shared subscription
            started, minute = time.perf_counter(), self.minute()
            try:
                reports = await forget(self.stack, user, self.args.timeout)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the soak goes on
                self.failed.append(f"forget: {exc!r}"[:200])
                return
            bad = [r.line() for r in reports if r.status != "forgotten"]
            if bad:
                self.failed.append(f"forget: {'; '.join(bad)}"[:200])
                return
            self.stored.pop(Scope("default", "default", user), None)
            self.forgotten += 1
            self.timed("forget", minute, started)

    async def run(self, facts: FactClient, talks: ConversationClient) -> None:
        kinds = [k for k, share in MIX.items() for _ in range(round(share * 10))]
        period, n = 1 / self.args.rate, 0
        ends = self.began + self.args.minutes * self.args.minute
        # Reports every minute from the schedule's start (warm-up minutes included).
        next_report = self.began - (self.warm - 1) * self.args.minute
        next_rss = self.scheduled
        while (now := time.perf_counter()) < ends:
            if now >= next_rss:
                self.rss_timeline.append((now - self.began, rss_mib()))
                next_rss += min(5.0, self.args.minute / 6)
            if now >= next_report:
                self.report(self.minute() - 1)
                next_report += self.args.minute
            for slot in self.work.leaving(now - self.scheduled, self.forgets):
                self.forgets += 1
                self.spawn(self.leave(slot))
            self.spawn(self.op(kinds[n % len(kinds)], n, facts, talks))
            n += 1
            await asyncio.sleep(max(0.0, self.scheduled + n * period - time.perf_counter()))
        await asyncio.gather(*self.tasks)
        self.report(self.minute() if self.minute() < self.args.minutes else self.args.minutes - 1)

    def spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def report(self, minute: int) -> None:
        # The test double records every prompt (about 0.8 MiB a minute here): not the stack's.
        self.stack.llm.requests.clear()
        self.rss[minute] = rss_mib()
        cells = []
        for kind in KINDS:
            took = self.took.get((minute, kind), [])
            if took:
                cells.append(f"{kind} {_p(took, 50):.0f}/{_p(took, 99):.0f} ms ({len(took)})")
        lag = self.answered - self.probe.learned()
        anon, disks = rss_mib("RssAnon"), disk_mib(self.root)
        disk = sum(disks.values())
        if minute >= 0:
            self.grown[minute] = (anon, disk)
        each = " ".join(f"{k} {v:.1f}" for k, v in sorted(disks.items()) if v >= 0.05)
        which = f"minute {minute + 1:>3}" if minute >= 0 else f"warm-up {minute + 1 + self.warm:>3}"
        print(
            f"{which}: " + ", ".join(cells) + f" | learner lag {lag} | "
            f"RSS {self.rss[minute]:.0f} MiB (anon {anon:.0f}) | disk {disk:.1f} MiB ({each}) | "
            f"broker dropped {sum(self.drops().values()):.0f}",
            flush=True,
        )
        if self.tracer is not None:
            self.tracer.minute()

    def drops(self) -> dict[str, float]:
        return dropped(self.metrics_port) if self.metrics_port else {}

    async def check(self, facts: FactClient) -> int:
        """Wait for the learner to drain (the answered asks: a failed one leaves no
        trajectory, and is counted as failed); return how much was lost."""
        waited = time.perf_counter()
        while self.probe.learned() < self.answered and time.perf_counter() - waited < 300:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        lost = max(0, self.answered - self.probe.learned())
        # A fact stored less than its TTL ago (less a sweep, for the clock's sake) is there.
        ttl = self.work.retention
        since = -1.0 if ttl is None else time.time() - ttl + self.work.sweep(self.args.minute)
        for scope, ids in self.stored.items():
            wanted = sorted(i for i, at in ids.items() if at > since)
            for start in range(0, len(wanted), 500):
                _, missing = await facts.get(scope, wanted[start : start + 500])
                lost += len(missing)
        drained = time.perf_counter() - waited
        print(f"drained in {drained:.1f} s; failed operations {len(self.failed)}; "
              f"lost {lost} (asks not learned, stored facts missing); "
              f"users forgotten {self.forgotten}")  # fmt: skip
        for line in self.failed[:5]:
            print(f"  failed: {line}")
        for where, count in sorted(self.drops().items(), key=lambda d: -d[1])[:5]:
            if count:
                print(f"  broker dropped {count:.0f} on {where}")
        return lost + len(self.failed)

    def verdict(self) -> bool:
        """Last five minutes against the first five (a run under ten minutes: the last
        third against the first), by when each operation started."""
        total = self.args.minutes * self.args.minute
        span = 5 * self.args.minute if self.args.minutes >= 10 else total / 3
        ratios, counts = {}, {}
        for kind in KINDS:
            early = [ms for t, k, ms in self.timeline if k == kind and 0 <= t < span]
            late = [ms for t, k, ms in self.timeline if k == kind and t >= total - span]
            if early and late:
                ratios[kind] = statistics.median(late) / statistics.median(early)
                counts[kind] = min(len(early), len(late))
        rss_early = [m for t, m in self.rss_timeline if 0 <= t < span]
        rss_late = [m for t, m in self.rss_timeline if t >= total - span] or rss_early[-1:]
        ratios["RSS"] = statistics.fmean(rss_late) / statistics.fmean(rss_early)
        # The mix and RSS are judged. A forget is the steady workload's way of
        # ending a user, one per 75 s: four or so a window, whose median says little.
        forget = ratios.pop("forget", None)
        flat = all(r <= SLOW_RATIO for k, r in ratios.items() if k != "RSS")
        flat = flat and ratios["RSS"] <= RSS_RATIO
        shown = ", ".join(f"{k} {r:.2f}x" for k, r in ratios.items())
        if forget is not None:
            shown += f"; not judged: forget {forget:.2f}x of {counts['forget']}"
        mode = "steady" if self.work.steady else "growth"
        data = ""
        if len(self.grown) > 1:
            first, last = self.grown[min(self.grown)][1], self.grown[max(self.grown)][1]
            data = f"; stored {first:.1f} -> {last:.1f} MiB, {last / max(first, 0.1):.1f}x"
        print(
            f"verdict ({mode}): {'flat' if flat else 'TRENDING UP'} (last {span:.0f} s over "
            f"first {span:.0f} s: {shown}; limits p50 {SLOW_RATIO}x, RSS {RSS_RATIO}x{data})",
            flush=True,
        )
        if not self.work.steady:
            print(
                "  (growth mode: every scope grows for the whole run; latency that grows "
                "with a scope's size is expected here, see docs/performance.md)",
                flush=True,
            )
        if len(self.grown) > 1:  # the heap's growth beside the data's (not a limit)
            (anon0, disk0), (anon1, disk1) = (
                self.grown[m] for m in (min(self.grown), max(self.grown))
            )
            per = ""
            if disk1 - disk0 >= max(1.0, disk0 / 4):  # per MiB stored, where the stores grew
                per = f": {(anon1 - anon0) / (disk1 - disk0):.2f} MiB of heap per MiB stored"
            print(f"heap: anon RSS {anon0:.0f} -> {anon1:.0f} MiB while the stores went "
                  f"{disk0:.1f} -> {disk1:.1f} MiB{per}", flush=True)  # fmt: skip
        return flat


def _p(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


async def soak(url: str, root: Path, args: argparse.Namespace, metrics_port: int) -> int:
    work = Workload.of(args)
    transport = PulsarTransport(PulsarOptions(url=url))
    await transport.connect()
    registry = CollectorRegistry()
    try:
        async with agent_stack(
            transport,
            root,
            uuid.uuid4().hex[:10],
            script=script,
            learner=True,
            learner_settings=work.learner_settings(),
            service_settings=work.service_settings(args.minute),
            registry=registry,
            playbook=PlaybookMemoryProcessor,
        ) as stack:
            clients: list[RequestResponseClient[Any, Any]] = []
            services = (
                ("fact-memory", FactResponse),
                ("conversation-memory", ConversationResponse),
            )
            for name, kind in services:
                topics = stack.topics[name]
                rpc: RequestResponseClient[Any, Any] = RequestResponseClient(
                    transport, topics["request"], topics["response"], kind
                )
                await rpc.start()
                clients.append(rpc)
            facts = FactClient(clients[0], timeout=args.timeout)
            talks = ConversationClient(clients[1], timeout=args.timeout)
            run = Soak(stack, Probe(stack, registry, learner=True), root, args, work)
            run.metrics_port = metrics_port
            life = "nothing deleted"
            if work.steady:
                life = (
                    f"kept {work.retention:g} s, a user forgotten every "
                    f"{(work.lifetime or 0) / work.users:g} s, warm-up {work.warmup:g} s"
                )
            print(f"started ({args.mode}): {args.rate:g} operations/s for {args.minutes} x "
                  f"{args.minute:g} s ({', '.join(f'{k} {v:.0%}' for k, v in MIX.items())}), "
                  f"{work.users} users, {life}", flush=True)  # fmt: skip
            await run.run(facts, talks)
            bad = await run.check(facts)
            run.verdict()
            for rpc in clients:
                await rpc.close()
            return bad
    finally:
        await transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--rate", type=float, default=8.0, help="operations started a second")
    parser.add_argument(
        "--minute", type=float, default=60.0, help="seconds in a reported minute (tests: less)"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="wait per operation, s")
    parser.add_argument(
        "--mode",
        choices=("steady", "growth"),
        default="steady",
        help="steady: users come and go, data kept for --retention (default); growth: the "
        "first soak's 12 users whose scopes grow all run (see soak_life.py)",
    )
    parser.add_argument("--users", type=int, default=0, help="users (default 48; growth 12)")
    parser.add_argument(
        "--retention", type=float, default=4.0, help="steady: minutes data is kept (4)"
    )
    parser.add_argument(
        "--lifetime", type=float, default=60.0, help="steady: minutes a user lives (60)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="steady: minutes run before measuring (default: --retention + 1)",
    )
    parser.add_argument(
        "--trace",
        nargs="?",
        const="objects",
        choices=("objects", "heap"),
        help="print what grows besides the data each minute (soak_trace.py)",
    )
    args = parser.parse_args()
    one_malloc_arena()  # as ``serve`` does, before any thread starts
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}", flush=True)  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="soak-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker", metrics_port=(port := free_port())) as broker,
    ):
        bad = asyncio.run(soak(broker.url, Path(tmp), args, port))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
