"""Faults on the embedded stack: recovery time, failed requests, lost and duplicated records.

The real parts, each processor in its own OS process: the embedded pulsar-lite broker (owned
by this process), fact-memory (ONNX embedder, qdrant-edge store), the memory learner, and a
group of the agent with the OpenAI-compatible text-completion processor, which talks to the
OpenAI-compatible test server from ``tests/support`` (run here, in a thread). This process
is the client. Each fault gets its own collection and a steady stream of requests before,
during and after it: fact writes (distinct facts, one per ``store``), fact retrievals, and
asks ("Please remember that <fact>") whose trajectories the learner turns into stored facts.

Per fault: *recovery* is the seconds from the fault's end (the restart, the LLM answering
again, the directory writable again) until a request sent after it succeeds (for the
learner: until every acknowledged ask's fact is stored); *failed* counts requests answered
with an error or not answered in time (``--timeout`` for fact requests, ``--ask-timeout``
for asks); *lost* counts acknowledged writes (stored facts, answered asks) whose fact is not
listed after recovery (``--drain`` seconds are given to the learner's backlog); *duplicated*
counts extra copies of one fact. Last, fact-memory is killed (-9) and restarted once more
and every row's acknowledged facts are counted again.

Issue 26's faults: the embedded broker killed and restarted by its supervisor (the one
``react-mem up`` runs), a full disk under fact-memory's store and the learner's ledger (one
small tmpfs, filled below their ``min_free_disk_mib``), a full disk under the embedded
broker's data (its own small tmpfs, below ``broker_min_free_disk_mib``; both need root to
mount, else the rows say so; the children find the broker through their state directory,
as processes beside ``react-mem up`` do, so they check its disk), eight replies over
the bus's message limit at once, the biggest valid batch (256 facts of 4,000
characters) stored beside the traffic, and writes over the limits sent beside it (an
episode of 100,000 lessons, to an episode-memory started for that row; 2,000 facts; 257
facts of 4,000 characters), each to be refused at once naming its limit, nothing stored.

    python benchmarks/faults.py            # about 10 minutes (the max-batch row: 1-2)
    python benchmarks/faults.py --quick    # under 2 minutes
    python benchmarks/faults.py --only llm --llm-concurrency 4
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import random
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fact_memory import corpus, locomo  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from memory_services.facts.records import normalise  # noqa: E402
from react_mem.bus.embedded import EmbeddedBroker, keep_embedded  # noqa: E402
from react_mem.bus.embedded_disk import BrokerDisk  # noqa: E402
from react_mem.bus.health import BusHealth  # noqa: E402
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport  # noqa: E402
from react_mem.bus.rpc import RequestResponseClient  # noqa: E402
from react_mem.clients.facts import FactClient  # noqa: E402
from react_mem.errors import ReactMemError  # noqa: E402
from react_mem.schema import AgentRequest, AgentResponse  # noqa: E402
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse  # noqa: E402
from react_mem.schema.facts import FactInput, FactRequest, FactResponse  # noqa: E402
from react_mem.schema.scope import Scope  # noqa: E402
from tests.support.memory_services import Raw  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402

FACTS_Q = ("request:tg:fact-memory:default:default", "response:tg:fact-memory:default:default")
AGENT_Q = ("request:tg:agent:default:default", "response:tg:agent:default:default")
LLM_Q = (
    "request:tg:text-completion:default:default",
    "response:tg:text-completion:default:default",
)
TRAJECTORY = "flow:tg:agent-trajectory:default:default"
AGENT_SYSTEM = "You are a helpful agent"
LEARNER_FACTS = "You curate the long-term memory"
Request = Coroutine[Any, Any, "Outcome"]
KEYS = (
    "broker",
    "facts",
    "learner",
    "llm",
    "read-only",
    "supervised",
    "disk-full",
    "broker-disk",
    "oversized",
    "max-batch",
    "oversized-writes",
)
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE = 1, 24, 1


# -- the OpenAI-compatible test server, with a hang and a learner "in flight" signal ----------
class LLM:
    """Answers the agent with a final answer and the learner's JSON questions with ``{}`` (it
    then learns the explicit "remember that" facts only). While ``hang`` is set, requests
    that arrive are held unanswered until :meth:`release_held` (a stuck model server);
    ``learner_seen`` is set, and the answer held ``learner_hold`` seconds, when the learner
    asks about a trajectory."""

    def __init__(self) -> None:
        self.server = OpenAIServer()
        self.server.reply = self._reply
        # A held request's client may be gone when it is let go: no traceback for that.
        self.server._http.handle_error = lambda *_: None  # type: ignore[method-assign]
        self.hang = threading.Event()
        self.learner_seen = threading.Event()
        self.learner_hold = 0.0
        self._held = threading.Event()
        self.held = 0  # requests held by a hang so far

    def _reply(self, body: dict[str, Any]) -> str:
        if self.hang.is_set():
            self.held += 1
            self._held.wait()
        system = str(body["messages"][0]["content"])
        if system.startswith(AGENT_SYSTEM):
            return "Thought: the user wants this kept.\nFinal Answer: Noted, I will remember it."
        if system.startswith(LEARNER_FACTS):
            self.learner_seen.set()
            time.sleep(self.learner_hold)
        return "{}"

    def release_held(self) -> None:
        self._held.set()
        self._held = threading.Event()


# -- child processes ------------------------------------------------------------------------
def _child_setup(read_only_applies: bool) -> Callable[[], None]:
    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive this benchmark
        if read_only_applies and os.geteuid() == 0:
            # root ignores file modes: without CAP_DAC_OVERRIDE a read-only directory applies
            libc.prctl(_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE)

    return setup


class Stack:
    def __init__(self, root: Path, llm: LLM, llm_concurrency: int) -> None:
        self.root, self.llm, self.llm_concurrency = root, llm, llm_concurrency
        self.broker = EmbeddedBroker(root / "broker")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        #: fact-memory's store and the learner's ledger share one small tmpfs (the
        #: disk-full row); the broker's data has its own (the broker-disk row).
        self.disk = root / "disk"
        self.facts_dir = self.disk / "facts-store"
        self.small_disks: list[Path] = []

    def mount_small_disks(self, mib: int) -> None:
        """The two small disks (tmpfs of ``mib`` MiB), where this process may mount them."""
        for where in (self.disk, self.broker.data_dir):
            where.mkdir(parents=True, exist_ok=True)
            mount = ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(where)]
            if subprocess.run(mount, capture_output=True, check=False).returncode == 0:
                self.small_disks.append(where)

    def unmount_small_disks(self) -> None:
        for where in self.small_disks:
            subprocess.run(["umount", "-l", str(where)], check=False)

    def state_dir(self, name: str) -> Path:
        """A child's state directory. Its ``broker`` links to the embedded broker's data,
        so the child finds the broker there, as a process beside ``react-mem up`` does, and
        checks the broker's disk before each publish (a ``--pulsar-host`` is not checked)."""
        state = self.disk / "learner-state" if name == "learner" else self.root / f"state-{name}"
        state.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            (state / "broker").symlink_to(self.broker.data_dir)
        return state

    def start_broker(self) -> str:
        self.broker = EmbeddedBroker(self.broker.data_dir, port=self.broker.port)
        return self.broker.start()

    def kill_broker(self) -> None:
        process = self.broker._process
        assert process is not None
        process.kill()
        process.wait()
        self.broker.stop()  # releases its lock and files

    def _write(self, name: str, content: dict[str, Any]) -> Path:
        path = self.root / name
        path.write_text(json.dumps(content))  # JSON is YAML
        return path

    def _flows(self, pid: str, topics: dict[str, str], **config: Any) -> Path:
        flow = {f"processor:{pid}": {"default": {"topics": topics, "parameters": {}}}}
        return self._write(f"flows-{pid}.yaml", {"default": flow | config})

    def spawn(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - the child's stdout
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "react_mem.cli", *args,
             "--no-metrics", "-l", "WARNING", "--state-dir", str(self.state_dir(name))],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=_child_setup(name == "facts"),
        )  # fmt: skip
        log.close()

    def start_facts(self) -> None:
        topics = {"request": FACTS_Q[0], "response": FACTS_Q[1]}
        settings = self._write("facts-settings.yaml", {"data_dir": str(self.facts_dir)})
        self.spawn("facts", "run", "fact-memory", "--id", "fact-memory", "--concurrency", "4",
                   "--flows", str(self._flows("fact-memory", topics)),
                   "--settings", str(settings))  # fmt: skip

    def start_learner(self) -> None:
        topics = {
            "trajectory": TRAJECTORY,
            "conversation-ended": "flow:tg:conversation-ended:default:default",
            "text-completion-request": LLM_Q[0], "text-completion-response": LLM_Q[1],
            "fact-memory-request": FACTS_Q[0], "fact-memory-response": FACTS_Q[1],
        }  # fmt: skip
        for service in ("episode-memory", "conversation-memory"):  # named, never called here
            for kind in ("request", "response"):
                topics[f"{service}-{kind}"] = f"{kind}:tg:{service}:default:default"
        flows = self._flows("memory-learner", topics)
        self.spawn(
            "learner", "run", "memory-learner", "--id", "memory-learner", "--flows", str(flows)
        )

    def start_agent(self) -> None:
        llm_flows = self._flows("text-completion", {"request": LLM_Q[0], "response": LLM_Q[1]})
        topics = {
            "request": AGENT_Q[0], "next": AGENT_Q[0], "response": AGENT_Q[1],
            "text-completion-request": LLM_Q[0], "text-completion-response": LLM_Q[1],
            "fact-memory-request": FACTS_Q[0], "fact-memory-response": FACTS_Q[1],
            "trajectory": TRAJECTORY,
        }  # fmt: skip
        agent_flows = self._flows("agent-mem", topics, **{"agent-mem": {}, "tool": {}})
        group = self._write("agent-group.yaml", {"processors": [
            {"class": "agent-mem", "params": {"id": "agent-mem", "concurrency": 4,
                                              "flows": str(agent_flows)}},
            {"class": "text-completion-openai", "params": {
                "id": "text-completion", "flows": str(llm_flows),
                "concurrency": self.llm_concurrency,
                "base_url": self.llm.server.url, "model": "double-1"}},
        ]})  # fmt: skip
        self.spawn("agent", "group", "-c", str(group))

    def problems(self) -> list[str]:
        """Warnings and errors the services have logged so far."""
        return [
            line.decode(errors="replace")
            for path in sorted(self.root.glob("*.log"))
            for line in path.read_bytes().splitlines()
            if b" WARNING " in line or b" ERROR " in line
        ]

    def overrides_modes(self, name: str) -> bool:
        """Whether a child may write where file modes say it may not (CAP_DAC_OVERRIDE)."""
        status = Path(f"/proc/{self.procs[name].pid}/status").read_text().splitlines()
        caps = next(line for line in status if line.startswith("CapEff:"))
        return bool(int(caps.split()[1], 16) & (1 << _CAP_DAC_OVERRIDE))

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.broker.stop()


# -- the client side --------------------------------------------------------------------------
@dataclass
class Outcome:
    kind: str  # write | read | ask
    sent: float
    done: float
    ok: bool
    fact: str | None = None  # the fact a write or ask asked to be kept
    merged: bool = False  # a write answered "reinforced": kept as another fact


@dataclass
class Clients:
    facts: RequestResponseClient[FactRequest, FactResponse]
    agent: RequestResponseClient[AgentRequest, AgentResponse]

    def fact_client(self, timeout: float) -> FactClient:
        return FactClient(self.facts, timeout=timeout)

    async def write(self, collection: str, fact: str, timeout: float) -> Outcome:
        sent = time.monotonic()
        try:
            reply = await self.fact_client(timeout).store(
                Scope("default", collection), [FactInput(content=fact)]
            )
        except ReactMemError:  # an error reply or none: the client raises either
            return Outcome("write", sent, time.monotonic(), False, fact)
        merged = any(s.status != "added" for s in reply.stored)
        return Outcome("write", sent, time.monotonic(), True, fact, merged)

    async def read(self, collection: str, query: str, timeout: float) -> Outcome:
        sent = time.monotonic()
        try:
            await self.fact_client(timeout).retrieve(Scope("default", collection), query, top_k=3)
        except ReactMemError:
            return Outcome("read", sent, time.monotonic(), False)
        return Outcome("read", sent, time.monotonic(), True)

    async def ask(self, collection: str, fact: str, timeout: float) -> Outcome:
        sent = time.monotonic()
        request = AgentRequest(question=f"Please remember that {fact}", collection=collection)
        last: AgentResponse | None = None
        try:
            async with asyncio.timeout(timeout):
                async for response in self.agent.stream(
                    request, last=lambda r: r.end_of_dialog, timeout=timeout
                ):
                    last = response
        except (ReactMemError, TimeoutError):
            return Outcome("ask", sent, time.monotonic(), False, fact)
        ok = last is not None and last.error is None and last.message_type != "error"
        return Outcome("ask", sent, time.monotonic(), ok, fact)

    async def listed(self, collection: str) -> list[str]:
        """Every current fact's normalised content (one entry per stored record)."""
        out: list[str] = []
        offset: str | None = None
        while True:
            page = await self.fact_client(30).page(
                Scope("default", collection), limit=1000, offset=offset
            )
            out += [normalise(f.content) for f in page.items]
            if not page.next:
                return out
            offset = page.next


def facts_for_run(count: int) -> list[str]:
    """Distinct generated facts about people (fact_memory's generator, LoCoMo turns skipped)."""
    turns = {key for t in locomo()[0] if (key := normalise(t))}
    return corpus(len(turns) + count)[len(turns) :]


async def until_answered(call: Callable[[], Awaitable[Outcome]], deadline: float) -> None:
    """Requests sent before a service subscribes are dropped: ask until one is answered."""
    end = time.monotonic() + deadline
    while not (await call()).ok:
        if time.monotonic() > end:
            raise ReactMemError(f"no answer within {deadline:.0f}s")


async def until_stored(
    clients: Clients, collection: str, wanted: list[str], deadline: float
) -> float | None:
    """Poll until every ``wanted`` fact is listed; the time that happened, or None."""
    end = time.monotonic() + deadline
    while True:
        try:
            stored = await clients.listed(collection)
        except ReactMemError:
            stored = []
        if all(any(w in s for s in stored) for w in wanted):
            return time.monotonic()
        if time.monotonic() > end:
            return None
        await asyncio.sleep(0.5)


# -- one fault --------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    recovery: float | None
    failed: int
    sent: int
    lost: int
    acked: int
    duplicated: int
    slowest: float
    notes: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    collection: str = ""


@dataclass
class Fault:
    name: str
    key: str
    run: Callable[[], Awaitable[float]]  # makes the fault; returns the moment it ended
    #: The requests it can fail: recovery is the first of these to succeed after it.
    kinds: tuple[str, ...] = ("write", "read", "ask")
    learner: bool = False  # recovery: the learner stores an ask's fact again


class Run:
    def __init__(self, args: argparse.Namespace, stack: Stack, clients: Clients) -> None:
        self.args, self.stack, self.clients = args, stack, clients
        self.texts = iter(facts_for_run(4000))
        self.asked: set[str] = set()  # every ask's fact, normalised
        self.notes: list[str] = []  # what the current fault found out about itself
        self._background: list[asyncio.Task[None]] = []  # a fault's own late checks

    async def traffic(self, collection: str, stop: asyncio.Event) -> list[Outcome]:
        a, tasks = self.args, list[asyncio.Task[Outcome]]()

        async def stream(rate: float, make: Callable[[], Request]) -> None:
            while not stop.is_set():
                tasks.append(asyncio.create_task(make()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1 / rate)

        recent: list[str] = ["What does Ava do for work?"]

        def write() -> Request:
            fact = next(self.texts)
            recent.append(fact)
            return self.clients.write(collection, fact, a.timeout)

        def ask() -> Request:
            fact = next(self.texts)
            self.asked.add(normalise(fact))
            return self.clients.ask(collection, fact, a.ask_timeout)

        streams = [
            stream(a.write_rate, write),
            stream(a.write_rate, lambda: self.clients.read(collection, recent[-1], a.timeout)),
            stream(a.ask_rate, ask),
        ]
        await asyncio.gather(*streams)
        return list(await asyncio.gather(*tasks))

    async def row(self, fault: Fault) -> Row:
        a, collection = self.args, f"faults-{fault.key}"
        print(f"  {fault.name} ...", flush=True)
        stop = asyncio.Event()
        running = asyncio.create_task(self.traffic(collection, stop))
        await asyncio.sleep(a.warm)
        held, fault_began, self.notes = self.stack.llm.held, time.monotonic(), []
        problems = self.stack.problems()
        fault_end = await fault.run()
        learned = asyncio.create_task(
            self.learned_again(collection, a.after + a.drain if fault.learner else 0)
        )
        await asyncio.sleep(a.after)
        stop.set()
        outcomes = await running
        self.stack.llm.release_held()
        acked = [o for o in outcomes if o.ok and o.fact is not None]
        wanted = [normalise(o.fact) for o in acked if o.fact is not None]
        caught_up = await until_stored(self.clients, collection, wanted, a.drain)
        stored = await self.clients.listed(collection)
        copies = [sum(w in s for s in stored) for w in wanted]
        relearned = await learned
        if fault.learner:
            recovery = None if relearned is None else relearned - fault_end
        else:
            after = [
                o.done for o in outcomes if o.ok and o.sent >= fault_end and o.kind in fault.kinds
            ]
            recovery = min(after) - fault_end if after else None
        failed = [o for o in outcomes if not o.ok]
        row = Row(
            fault.name, recovery, len(failed), len(outcomes), copies.count(0), len(acked),
            sum(c - 1 for c in copies if c > 1), max(o.done - o.sent for o in outcomes),
            expected=wanted, collection=collection,
        )  # fmt: skip
        by_kind = {k: [o for o in outcomes if o.kind == k] for k in ("write", "read", "ask")}
        row.notes.append(", ".join(
            f"{k}s {sum(not o.ok for o in v)}/{len(v)} failed" for k, v in by_kind.items()
        ))  # fmt: skip
        during = [o for o in outcomes if fault_began <= o.sent < fault_end and o.kind == "ask"]
        if during:
            waits = sorted(o.done - o.sent for o in during)
            row.notes.append(
                f"asks sent during the fault: {sum(o.ok for o in during)}/{len(during)} "
                f"answered, waits {waits[0]:.1f}-{waits[-1]:.1f} s"
            )
        if self.stack.llm.held > held:
            row.notes.append(f"{self.stack.llm.held - held} LLM requests held by the hang")
        merged = [o for o in acked if o.merged]
        if merged:
            row.notes.append(f"{len(merged)} acknowledged writes were merged into another fact")
        if caught_up is None:
            row.notes.append(f"the learner's backlog was not stored within {a.drain:.0f} s")
        await asyncio.gather(*self._background)
        self._background = []
        row.notes += self.notes
        if logged := sorted(set(self.stack.problems()) - set(problems)):
            first = logged[0].split(": ", 1)[-1][:120]
            row.notes.append(f"{len(logged)} warnings/errors logged, first: {first!r}")
        print(f"    {'; '.join(row.notes)}; recovery {_secs(row.recovery)}, lost {row.lost}, "
              f"duplicated {row.duplicated}", flush=True)  # fmt: skip
        return row

    async def learned_again(self, collection: str, deadline: float) -> float | None:
        """When the learner next stores an ask's fact that was not stored a moment ago."""
        if not deadline:
            return None
        before = set(await self.clients.listed(collection))
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            with contextlib.suppress(ReactMemError):
                for s in await self.clients.listed(collection):
                    if s not in before and any(a in s for a in self.asked):
                        return time.monotonic()
            await asyncio.sleep(0.25)
        return None

    def faults(self) -> list[Fault]:
        a = self.args
        return [
            Fault("broker kill -9, restart", "broker", self.broker),
            Fault(
                "memory-service kill -9, restart", "facts", self.memory_service, ("write", "read")
            ),
            Fault("learner kill -9 mid-trajectory, restart", "learner", self.learner, learner=True),
            Fault(f"LLM hang ({a.hang:g} s)", "llm", self.llm_hang, ("ask",)),
            Fault(
                f"store dir read-only ({a.read_only:g} s)", "read-only", self.read_only, ("write",)
            ),
            Fault("embedded broker kill -9, supervisor restarts it", "supervised", self.supervised),
            Fault(
                f"store and ledger disk full ({a.outage:g} s)",
                "disk-full",
                self.disk_full,
                ("write",),
            ),
            Fault(f"broker disk full ({a.outage:g} s)", "broker-disk", self.broker_disk, ("ask",)),
            Fault("8 replies over the 5 MiB limit at once", "oversized", self.oversized),
            Fault("max batch (256 x 4,000 chars) beside traffic", "max-batch", self.max_batch),
            Fault(
                "oversized writes (100,000 lessons; 2,000 facts; 257 x 4,000)",
                "oversized-writes",
                self.oversized_writes,
            ),
        ]

    # -- the faults: each returns the moment the fault ended --
    async def broker(self) -> float:
        self.stack.kill_broker()
        await asyncio.sleep(self.args.outage)
        await asyncio.to_thread(self.stack.start_broker)
        return time.monotonic()

    async def memory_service(self) -> float:
        self.stack.kill("facts")
        self.stack.start_facts()
        return time.monotonic()

    async def learner(self) -> float:
        llm = self.stack.llm
        llm.learner_seen.clear()
        llm.learner_hold = 1.0  # the kill lands while a trajectory's LLM call is in flight
        await asyncio.to_thread(llm.learner_seen.wait, 60)
        await asyncio.sleep(0.2)
        self.stack.kill("learner")
        llm.learner_hold = 0.0
        self.stack.start_learner()
        return time.monotonic()

    async def llm_hang(self) -> float:
        self.stack.llm.hang.set()
        await asyncio.sleep(self.args.hang)
        self.stack.llm.hang.clear()  # held requests stay held until the row ends
        return time.monotonic()

    async def read_only(self) -> float:
        if self.stack.overrides_modes("facts"):
            self.notes.append("fact-memory can override file modes: no real fault")
        paths = [self.stack.facts_dir, *self.stack.facts_dir.rglob("*")]
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        await asyncio.sleep(self.args.read_only)
        for p in paths:
            p.chmod(modes[p])
        return time.monotonic()

    async def supervised(self) -> float:
        """kill -9 of the broker with nothing done by hand: its owner's supervisor
        (``keep_embedded``, as in ``react-mem up``) notices and restarts it."""
        health = BusHealth(CollectorRegistry())
        watch = asyncio.create_task(keep_embedded(self.stack.broker, health))
        await asyncio.sleep(0)
        pid = self.stack.broker.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        for wanted in (False, True):  # noticed down, then restarted
            while health.up is not wanted:  # noqa: ASYNC110 - the supervisor's state, polled
                await asyncio.sleep(0.02)
        self.notes.append(f"broker back {time.monotonic() - killed:.1f} s after the kill")
        watch.cancel()
        return killed

    async def disk_full(self) -> float:
        """fact-memory's store and the learner's ledger share a disk, filled below their
        64 MiB floors: writes are answered ``disk-full``, learning waits (its trajectories
        kept on the bus), asks are still answered; all resume when space is freed."""
        if self.stack.disk not in self.stack.small_disks:
            self.notes.append("no small filesystem could be mounted here: no real fault")
            await asyncio.sleep(self.args.outage)
            return time.monotonic()
        filler = _fill(self.stack.disk, leave_mib=16)
        await asyncio.sleep(self.args.outage)
        filler.unlink()
        freed = time.monotonic()
        collection, wait = "faults-disk-full", self.args.after + self.args.drain

        async def learning_resumed() -> None:
            when = await self.learned_again(collection, wait)
            self.notes.append(f"learning resumed {_secs(None if when is None else when - freed)}"
                              " s after space returned")  # fmt: skip

        self._background.append(asyncio.create_task(learning_resumed()))
        return freed

    async def broker_disk(self) -> float:
        """The embedded broker's disk filled below its 64 MiB floor while its owner keeps it
        as ``react-mem up`` does: publishes (the asks' trajectories) are refused, requests
        go on; once space is back the broker is restarted (a log pulsar-lite tore on a full
        disk is read back whole only by a new broker) and asks are answered again."""
        broker = self.stack.broker
        if broker.data_dir not in self.stack.small_disks:
            self.notes.append("no small filesystem could be mounted here: no real fault")
            await asyncio.sleep(self.args.outage)
            return time.monotonic()
        health = BusHealth(CollectorRegistry())
        disk = BrokerDisk(broker.data_dir, 64)
        watch = asyncio.create_task(keep_embedded(broker, health, disk=disk))
        pid = broker.pid
        filler = _fill(broker.data_dir, leave_mib=16)
        await asyncio.sleep(self.args.outage)
        filler.unlink()
        freed = time.monotonic()
        while (broker.pid == pid or not health.up) and time.monotonic() - freed < 60:  # noqa: ASYNC110 - the supervisor's state, polled
            await asyncio.sleep(0.02)
        back = "never" if broker.pid == pid else f"{time.monotonic() - freed:.1f} s"
        self.notes.append(f"broker restarted {back} after space returned")
        watch.cancel()
        return freed

    async def oversized(self) -> float:
        """220 facts of 4,000 mostly non-ASCII characters (two valid batches), then eight
        ``list`` requests at once for all of them: each reply would be over 5 MiB."""
        scope = Scope("default", "faults-oversized-data")
        wide = "é" * 3990
        for batch in range(2):
            facts = [FactInput(content=f"{batch}-{n:03d} {wide}") for n in range(110)]
            await self.clients.fact_client(600).store(scope, facts)
        began = time.monotonic()
        lists = [
            self.clients.facts.request(
                FactRequest(operation="list", collection=scope.collection, limit=220), timeout=60
            )
            for _ in range(8)
        ]
        replies = await asyncio.gather(*lists, return_exceptions=True)
        kinds = sorted(
            {getattr(getattr(r, "error", None), "type", None) or repr(r) for r in replies}
        )
        self.notes.append(f"8 lists answered in {time.monotonic() - began:.1f} s: {kinds}")
        return time.monotonic()

    async def max_batch(self) -> float:
        words = ("river", "lantern", "copper", "meadow", "quiet", "harbour", "velvet", "orbit")
        rng = random.Random(5)
        facts = [
            FactInput(content=" ".join(rng.choice(words) for _ in range(700))[:4000])
            for _ in range(256)
        ]
        began = time.monotonic()
        try:
            await self.clients.fact_client(600).store(Scope("default", "faults-batch-data"), facts)
            outcome = "stored"
        except ReactMemError as exc:
            outcome = f"failed: {exc}"
        self.notes.append(f"the batch {outcome} in {time.monotonic() - began:.1f} s")
        return time.monotonic()

    async def oversized_writes(self) -> float:
        """Writes over the limits, each to be refused at once with an error naming its
        limit and nothing stored: an episode of 100,000 lessons (to an episode-memory
        started for this row: the stack's learner has none), 2,000 facts in one ``store``
        (the wire's limit is 1,024) and 257 facts of 4,000 characters (the service's, 256)."""
        stack, collection = self.stack, "faults-oversized-writes-data"
        queues = ("request:tg:episode-memory:default:faults",
                  "response:tg:episode-memory:default:faults")  # fmt: skip
        settings = stack._write("episodes-settings.yaml", {"data_dir": str(stack.root / "eps")})
        flows = stack._flows("episode-memory", {"request": queues[0], "response": queues[1]})
        stack.spawn("episodes", "run", "episode-memory", "--id", "episode-memory",
                    "--flows", str(flows), "--settings", str(settings))  # fmt: skip
        transport = PulsarTransport(PulsarOptions(url=stack.broker.url, connect_timeout=120))
        await transport.connect()
        episodes = RequestResponseClient(transport, *queues, EpisodeResponse, subscriber="faults")
        await episodes.start()
        listing = EpisodeRequest(operation="list", collection=collection, user="ada")
        try:
            began = time.monotonic()
            while True:  # the service started: it answers
                with contextlib.suppress(ReactMemError, TimeoutError):
                    await episodes.request(listing, timeout=2)
                    break
                if time.monotonic() - began > 180:
                    raise ReactMemError("episode-memory did not start in 180 s")
            self.notes.append(f"episode-memory up in {time.monotonic() - began:.0f} s")
            store = {"operation": "store", "collection": collection, "user": "ada"}
            lessons = [f"lesson {n}" for n in range(100_000)]
            episode = store | {"goal": "find the lantern", "outcome": "success"}
            words = " ".join(["lantern"] * 500)[:4000]
            for name, client, body in (
                ("100,000 lessons", episodes, episode | {"lessons": lessons}),
                ("2,000 facts", self.clients.facts, store | {"facts": [{"content": "x"}] * 2000}),
                ("257 x 4,000", self.clients.facts, store | {"facts": [{"content": words}] * 257}),
            ):
                sent = time.monotonic()
                reply = await client.request(Raw(body=body), timeout=60)  # type: ignore[arg-type]
                error = reply.error
                said = "stored!" if error is None else f"{error.type}: {error.message[:70]}"
                self.notes.append(f"{name} answered in {time.monotonic() - sent:.2f} s ({said})")
            kept = len((await episodes.request(listing, timeout=30)).episodes)
            kept += len(await self.clients.listed(collection))
            self.notes.append(f"{kept} records stored by them")
        finally:
            await episodes.close()
            await transport.close()
            stack.kill("episodes")
        return time.monotonic()


def _fill(disk: Path, leave_mib: int) -> Path:
    """A file taking all but ``leave_mib`` MiB of ``disk``."""
    free = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as out:
        out.write(b"\0" * max(free.f_bavail * free.f_frsize - leave_mib * 2**20, 0))
    return filler


def _secs(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def table(rows: list[Row]) -> str:
    head = ("fault", "recovery s", "failed", "lost", "duplicated", "slowest answer s")
    body = [
        (r.name, _secs(r.recovery), f"{r.failed}/{r.sent}", f"{r.lost}/{r.acked}",
         str(r.duplicated), f"{r.slowest:.1f}")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in [head, *body]
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


async def bench(args: argparse.Namespace, stack: Stack) -> None:
    transport = PulsarTransport(PulsarOptions(url=stack.broker.url, connect_timeout=120))
    await transport.connect()
    clients = Clients(
        RequestResponseClient(transport, *FACTS_Q, FactResponse, subscriber="faults"),
        RequestResponseClient(transport, *AGENT_Q, AgentResponse, subscriber="faults"),
    )
    await clients.facts.start()
    await clients.agent.start()
    run = Run(args, stack, clients)
    try:
        started = time.monotonic()
        await until_answered(lambda: clients.read("warm-up", "anything", 1.0), 180)
        fact = next(run.texts)
        await until_answered(lambda: clients.ask("warm-up", fact, 5.0), 180)
        if await until_stored(clients, "warm-up", [normalise(fact)], 180) is None:
            raise ReactMemError("the learner did not store the warm-up fact")
        print(f"stack up and learning in {time.monotonic() - started:.0f} s", flush=True)
        rows = [await run.row(f) for f in run.faults() if not args.only or f.key in args.only]
        stack.llm.release_held()
        print(f"\nwrites {args.write_rate:g}/s, retrievals {args.write_rate:g}/s, asks "
              f"{args.ask_rate:g}/s; {args.warm:g} s before each fault, {args.after:g} s after; "
              f"outages {args.outage:g} s\n")  # fmt: skip
        print(table(rows))
        for r in rows:
            print(f"  {r.name}: " + "; ".join(r.notes))
        # Durability: what an acknowledgement promised survives one more crash.
        stack.kill("facts")
        stack.start_facts()
        await until_answered(lambda: clients.read("warm-up", "anything", 1.0), 180)
        missing = total = 0
        for r in rows:
            stored = await clients.listed(r.collection)
            missing += sum(not any(w in s for s in stored) for w in r.expected)
            total += len(r.expected)
        print(f"\nafter one more fact-memory kill -9 and restart: {missing} of {total} "
              f"acknowledged facts missing")  # fmt: skip
    finally:
        stack.llm.release_held()
        # An interrupted row leaves requests in flight: end them before their clients close.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await clients.facts.close()
        await clients.agent.close()
        await transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter phases and waits")
    parser.add_argument("--write-rate", type=float, default=4.0, help="fact writes (and reads)/s")
    parser.add_argument("--ask-rate", type=float, default=1.0, help="asks/s")
    parser.add_argument("--warm", type=float, default=4.0, help="seconds of traffic before a fault")
    parser.add_argument("--after", type=float, default=8.0, help="seconds of traffic after it")
    parser.add_argument("--outage", type=float, default=4.0, help="broker down, store read-only")
    parser.add_argument("--read-only", type=float, default=8.0, help="seconds the store is")
    parser.add_argument(
        "--llm-concurrency", type=int, default=1, help="text-completion's (the stack's: 1)"
    )
    parser.add_argument("--only", nargs="+", choices=KEYS, help="these faults only")
    parser.add_argument("--hang", type=float, default=20.0, help="seconds the LLM hangs")
    parser.add_argument("--timeout", type=float, default=5.0, help="patience per fact request")
    parser.add_argument("--ask-timeout", type=float, default=120.0, help="patience per ask")
    parser.add_argument("--drain", type=float, default=90.0, help="wait for the learner's backlog")
    parser.add_argument("--disk-mib", type=int, default=512, help="each small disk")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # the services' processes inherit it
    if args.quick:
        args.warm, args.after, args.outage, args.hang, args.read_only = 2.0, 5.0, 3.0, 10.0, 6.0
        args.ask_timeout, args.drain = 60.0, 60.0
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"settings: {vars(args)}", flush=True)  # fmt: skip
    # SIGTERM unwinds like Ctrl-C (even where Ctrl-C was ignored), so the children and the
    # broker are always stopped.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="faults-bench-") as name:
        llm = LLM()
        llm.server.start()
        stack = Stack(Path(name), llm, args.llm_concurrency)
        try:
            stack.mount_small_disks(args.disk_mib)
            stack.start_broker()
            stack.start_facts()
            stack.start_learner()
            stack.start_agent()
            asyncio.run(bench(args, stack))
        except KeyboardInterrupt:
            print("interrupted; stopping the stack", file=sys.stderr)
        except Exception:
            for log in sorted(stack.root.glob("*.log")):  # what the services said
                tail = log.read_text(errors="replace").splitlines()[-15:]
                print(f"--- {log.name}:", *tail, sep="\n", file=sys.stderr)
            raise
        finally:
            llm.release_held()
            stack.stop()
            stack.unmount_small_disks()
            llm.server.stop()


if __name__ == "__main__":
    main()
