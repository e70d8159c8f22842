"""``agent_throughput.py --layout split``: the agent as it is deployed (compose, the chart),
with the learner in its process and everything else in other processes.

Each memory service, the scripted LLM (with the graph-rag double) and the caller (standing
for TrustGraph's client, whose decoding of the agent's replies and explain messages is its
own) run in child processes (``multiprocessing``, spawned), over the same embedded broker
and on the same queues as the one-process stack (``tests/support/agent_stack.py``'s
``neighbours``, the agent's stack with ``running=()`` and ``script=None``). A child obeys
commands on its pipe: ``window`` (the caller: run the asks, return their spans), ``reset``
``cpu`` and ``handled`` (with ``--phases``: its event loop's CPU by owner, its
handlers' wall times), ``stop``. The parent reads
every child's CPU time from ``/proc``. With ``--profile PATH`` each child profiles its
event loop's thread (CPU time, ``time.thread_time``) from its start to its stop and writes
``PATH.<role>`` (``PATH.fact-memory``, ...) beside the agent's process's ``PATH``.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agent_load import ask_loop, script
from ask_phases import Phases
from prometheus_client import CollectorRegistry

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.schema import AgentRequest, AgentResponse
from tests.support.agent_stack import PLAYBOOK, SERVICES, neighbours, queues

CALLER, LLM = "caller", "llm"
_PR_SET_PDEATHSIG = 1


def roles(playbook: bool) -> list[str]:
    """One child per memory service (as compose runs them), the LLM's and the caller's."""
    return [*SERVICES, *([PLAYBOOK] if playbook else []), LLM, CALLER]


@dataclass(frozen=True)
class Spec:
    role: str
    url: str
    root: Path
    unique: str
    phases: bool
    profile: Path | None = None


class Caller:
    """TrustGraph's side of an ask: a request/response client of the agent's queues."""

    def __init__(self, transport: PulsarTransport, unique: str) -> None:
        topics = queues(unique)["agent"]
        self.client: RequestResponseClient[AgentRequest, AgentResponse] = RequestResponseClient(
            transport, topics["request"], topics["response"], AgentResponse
        )

    async def ask(
        self, question: str, *, timeout: float = 60.0, **fields: Any
    ) -> list[AgentResponse]:
        request = AgentRequest(question=question, **fields)
        stream = self.client.stream(request, last=lambda r: r.end_of_dialog, timeout=timeout)
        return [r async for r in stream]


def child_main(spec: Spec, conn: Connection) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if sys.platform == "linux":  # a benchmark stopped by a signal takes its children along
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    profiler = cProfile.Profile(time.thread_time) if spec.profile is not None else None
    if profiler is not None:
        profiler.enable()
    try:
        asyncio.run(_child(spec, conn))
    finally:
        if profiler is not None and spec.profile is not None:
            profiler.disable()
            profiler.dump_stats(f"{spec.profile}.{spec.role}")


async def _child(spec: Spec, conn: Connection) -> None:
    transport = PulsarTransport(PulsarOptions(url=spec.url))
    await transport.connect()
    phases = Phases() if spec.phases else None
    if phases is not None:
        phases.install(Caller)
    loop = asyncio.get_running_loop()
    try:
        async with contextlib.AsyncExitStack() as parts:
            caller = None
            if spec.role == CALLER:
                caller = Caller(transport, spec.unique)
                await caller.client.start()
                parts.push_async_callback(caller.client.close)
            else:
                await parts.enter_async_context(
                    neighbours(
                        transport,
                        spec.root,
                        spec.unique,
                        script=script if spec.role == LLM else None,
                        running=() if spec.role == LLM else (spec.role,),
                        playbook=PlaybookMemoryProcessor,
                        registry=CollectorRegistry(),
                    )
                )
            conn.send("ready")
            while True:
                command, *rest = await loop.run_in_executor(None, conn.recv)
                if command == "stop":
                    break
                if command == "window" and caller is not None:
                    callers, seconds, base, pause, timeout = rest
                    try:
                        spans = await ask_loop(
                            caller.ask, callers, seconds, base, pause=pause, timeout=timeout
                        )
                    except Exception as exc:  # noqa: BLE001 - told to the parent, which stops
                        conn.send(RuntimeError(f"the caller: {exc}"))
                        continue
                    conn.send(spans)
                elif command == "reset" and phases is not None:
                    phases.reset()
                    conn.send(None)
                elif command == "cpu":
                    conn.send(dict(phases.cpu) if phases is not None else {})
                elif command == "handled":
                    conn.send(dict(phases.handled) if phases is not None else {})
                else:
                    conn.send(ValueError(f"{spec.role}: no command {command!r}"))
    finally:
        await transport.close()


def cpu_seconds(pid: int) -> float:
    """User and system CPU of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Children:
    """The split layout's child processes, by role."""

    def __init__(
        self,
        url: str,
        root: Path,
        unique: str,
        *,
        playbook: bool,
        phases: bool,
        profile: Path | None = None,
    ):
        context = multiprocessing.get_context("spawn")
        self.conns: dict[str, Connection] = {}
        self.procs: dict[str, Any] = {}
        for role in roles(playbook):
            ours, theirs = context.Pipe()
            spec = Spec(role, url, root, unique, phases, profile)
            self.procs[role] = context.Process(target=child_main, args=(spec, theirs), name=role)
            self.conns[role] = ours

    async def start(self, timeout: float = 300.0) -> None:
        for proc in self.procs.values():
            proc.start()
        for role in self.procs:  # each answers "ready" once its processors are started
            got = await self.call(role, None, timeout=timeout)
            if got != "ready":
                raise RuntimeError(f"child {role} did not start: {got!r}")

    async def call(self, role: str, command: tuple[Any, ...] | None, timeout: float = 600) -> Any:
        conn = self.conns[role]
        if command is not None:
            conn.send(command)
        loop = asyncio.get_running_loop()
        ready = await loop.run_in_executor(None, conn.poll, timeout)
        if not ready:
            raise TimeoutError(f"child {role} did not answer {command!r} in {timeout} s")
        got = conn.recv()
        if isinstance(got, BaseException):
            raise got
        return got

    async def each(self, command: tuple[Any, ...]) -> dict[str, Any]:
        return {role: await self.call(role, command) for role in self.procs}

    def cpu(self) -> dict[str, float]:
        return {role: cpu_seconds(proc.pid) for role, proc in self.procs.items()}

    def stop(self) -> None:
        for role, proc in self.procs.items():
            if proc.is_alive():
                with contextlib.suppress(OSError):
                    self.conns[role].send(("stop",))
        for proc in self.procs.values():
            proc.join(30)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)


def merged(counters: dict[str, dict[str, float]]) -> Counter[str]:
    """Children's loop CPU by owner, each owner named with its process."""
    total: Counter[str] = Counter()
    for role, cpu in counters.items():
        for owner, seconds in cpu.items():
            total[f"[{role}] {owner}"] += seconds
    return total
