"""Where an ask's time goes, for ``agent_throughput.py --phases`` (one caller).

Two views, both taken by wrapping the running code from outside (instrumentation of the
benchmark, nothing of it in the services):

- **the timeline**: wall time stamps at the edges of each phase of every ask (the caller's
  send, the agent's handler, memory recall and its embedding, the prompt, the LLM call, the
  trajectory's publish and the turn's append, the answer) and the median of each phase;
- **the loop's CPU per owner**: every callback the event loop runs is timed in CPU time of
  its thread and charged to the processor whose handler it runs for (the agent, each memory
  service, the learner, the scripted LLM), to the caller, or to the bus's plumbing
  (response routing, receive loops, the client library's callbacks), per ask answered;
- **each side of recall**: every recall source's wall time as the agent saw it, and every
  handler's wall time by processor and operation (in each process of the split layout):
  the difference is the bus and the waits for a loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from react_mem.agent import ending, recall, service
from react_mem.processor import consumer

#: Phases as (label, first mark, second mark); a mark is a wrapped call's start (``>``) or
#: end (``<``).
SPANS = (
    ("to the agent", "ask>", "handler>"),
    ("recall: embedding", "embed>", "embed<"),
    ("recall: all sources", "recall>", "recall<"),
    ("memory section render", "render>", "render<"),
    ("recall to LLM call", "begin<", "llm>"),
    ("LLM call (excluded)", "llm>", "llm<"),
    ("LLM to learning hand-off", "llm<", "publish>"),
    ("trajectory publish", "publish>", "publish<"),
    ("turn append", "append>", "append<"),
    ("hand-off to answer", "append<", "answer>"),
    ("answer sent", "answer>", "answer<"),
    ("answer to the caller", "answer<", "ask<"),
    ("LLM to answer, in all", "llm<", "answer>"),
    ("whole ask", "ask>", "ask<"),
)

#: A request's operation, from the start of its JSON (the benchmark's own instrumentation).
_OPERATION = re.compile(rb'"operation": ?"([a-z-]+)"')
_owner: contextvars.ContextVar[str] = contextvars.ContextVar("owner", default="")


class Phases:
    def __init__(self) -> None:
        self.marks: list[tuple[float, str]] = []
        self.cpu: Counter[str] = Counter()
        #: Wall seconds of each handler run, by owner and operation (the service's side).
        self.handled: dict[str, list[float]] = defaultdict(list)
        #: Wall seconds of each recall source as the agent saw it (``Recall.timings``).
        self.sources: dict[str, list[float]] = defaultdict(list)

    def install(self, stack_class: type) -> None:
        """Wrap the phases' functions and the loop's callbacks (before the stack starts)."""
        self._wrap(stack_class, "ask", "ask", owner="caller")
        self._wrap(service.AgentProcessor, "on_request", "handler")
        self._wrap(service.AgentProcessor, "begin", "begin")
        self._wrap(recall.MemoryRecall, "recall", "recall")
        self._wrap(recall.MemoryRecall, "_embed", "embed")
        self._wrap(service.prompt, "render_context", "render")
        self._wrap(service, "decide", "llm")
        self._wrap(ending, "publish_trajectory", "publish")
        self._wrap(ending.InvocationEnd, "append_turn", "append")
        self._wrap(service.Responder, "answer", "answer")
        settle = consumer.ConsumerRunner._settle
        handled, sources = self.handled, self.sources

        async def owned(runner: Any, consumer: Any, delivery: Any) -> Any:
            # "agent-mem-<unique>--ws--flow--spec": the processor's kind and its spec.
            proc, spec = runner.subscription.split("--")[0], runner.subscription.split("--")[-1]
            owner = f"{proc.rsplit('-', 1)[0]} ({spec})"
            _owner.set(owner)
            op = _OPERATION.search(delivery.data[:300])
            began = time.perf_counter()
            try:
                return await settle(runner, consumer, delivery)
            finally:
                name = f"{owner} {op.group(1).decode()}" if op else owner
                handled[name].append(time.perf_counter() - began)

        recall_of = recall.MemoryRecall.recall

        @functools.wraps(recall_of)
        async def timed_recall(*args: Any, **kwargs: Any) -> Any:
            got = await recall_of(*args, **kwargs)
            for name, seconds in got.timings.items():
                sources[name].append(seconds)
            return got

        recall.MemoryRecall.recall = timed_recall  # type: ignore[method-assign]

        consumer.ConsumerRunner._settle = owned  # type: ignore[method-assign]
        self._time_callbacks()

    def _wrap(self, owner_obj: Any, attr: str, name: str, *, owner: str = "") -> None:
        original: Callable[..., Any] = getattr(owner_obj, attr)
        marks = self.marks
        if asyncio.iscoroutinefunction(original):

            @functools.wraps(original)
            async def timed(*args: Any, **kwargs: Any) -> Any:
                if owner:
                    _owner.set(owner)
                marks.append((time.perf_counter(), name + ">"))
                try:
                    return await original(*args, **kwargs)
                finally:
                    marks.append((time.perf_counter(), name + "<"))

            setattr(owner_obj, attr, timed)
        else:

            @functools.wraps(original)
            def timed_sync(*args: Any, **kwargs: Any) -> Any:
                marks.append((time.perf_counter(), name + ">"))
                try:
                    return original(*args, **kwargs)
                finally:
                    marks.append((time.perf_counter(), name + "<"))

            setattr(owner_obj, attr, timed_sync)

    def _time_callbacks(self) -> None:
        handle = asyncio.events.Handle
        run = handle._run
        cpu, clock = self.cpu, time.thread_time

        def timed(h: Any) -> None:
            began = clock()
            try:
                run(h)
            finally:
                cpu[_charged(h)] += clock() - began

        handle._run = timed  # type: ignore[method-assign]

    def reset(self) -> None:
        self.marks.clear()
        self.cpu.clear()
        self.handled.clear()
        self.sources.clear()

    def add_asks(self, spans: list[tuple[float, float]]) -> None:
        """Asks timed elsewhere (the split layout's caller, on the same clock)."""
        self.marks.extend(m for s, e in spans for m in ((s, "ask>"), (e, "ask<")))
        self.marks.sort()

    def report(self, asks: int) -> None:
        """Print each phase's median over the asks since the last reset, then the loop's
        CPU per owner per ask."""
        found, current = [], None
        for stamp, mark in self.marks:
            if mark == "ask>":
                current = {mark: stamp}
            elif current is not None and (mark[-1] == ">" or mark[:-1] + ">" in current):
                # An ask's first of each (one iteration); an end only after its start (a
                # caller in another process can see the answer before its send returns).
                current.setdefault(mark, stamp)
                if mark == "ask<":
                    found.append(current)
                    current = None
        print(f"    phases of an ask, median wall ms over {len(found)} asks:")
        for label, first, second in SPANS:
            spans = [(a[second] - a[first]) * 1000 for a in found if first in a and second in a]
            if spans:
                print(f"      {label:<26} {statistics.median(spans):7.2f}")
        if self.sources:
            shown = ", ".join(
                f"{k} {statistics.median(v) * 1000:.2f}" for k, v in sorted(self.sources.items())
            )
            print(f"    recall by source, as the agent saw it (median wall ms): {shown}")
        self.report_cpu("event-loop CPU per ask by owner", self.cpu, asks)

    @staticmethod
    def report_handled(handled: dict[str, list[float]], asks: int) -> None:
        """Each handler's median wall time and runs per ask, by owner and operation."""
        print("    handlers (median wall ms, runs per ask):")
        for name, runs in sorted(handled.items()):
            if len(runs) >= asks / 20:
                median = statistics.median(runs) * 1000
                print(f"      {name:<54} {median:6.2f} {len(runs) / max(asks, 1):5.2f}")

    @staticmethod
    def report_cpu(title: str, cpu: Counter[str], asks: int) -> None:
        per_ask = sum(cpu.values()) / max(asks, 1) * 1000
        print(f"    {title} (ms; {per_ask:.1f} in all):")
        for owner, seconds in cpu.most_common():
            if seconds / max(asks, 1) >= 0.05e-3:
                print(f"      {owner:<54} {seconds / max(asks, 1) * 1000:6.2f}")


def _charged(handle: Any) -> str:
    """Who a callback ran for: the handler's processor or the caller (set in its
    context), else the bus plumbing it belongs to."""
    context = handle._context
    owner = context.get(_owner, "") if context is not None else ""
    if owner:
        return str(owner)
    callback = handle._callback
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        name = task.get_coro().__qualname__  # type: ignore[union-attr]
        if name.endswith("_route"):  # task "rr:response:tg:<service>-<unique>:ws:flow"
            service_name = task.get_name().split(":")[3].rsplit("-", 1)[0]
            who = "the caller's" if service_name == "agent" else "its clients'"
            return f"bus: {service_name}'s responses ({who} decode)"
        if name.endswith("_receive_loop"):
            return "bus: consumers' receive loops"
        return f"other task: {name}"
    return "bus: client library callbacks"
