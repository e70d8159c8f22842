"""An ask's timeline after the LLM's reply: ``agent_throughput.py --phases`` (one caller), plus
a stamp at every encode, every message handed to the bus client (``enq``) and every broker
receipt (``rcpt``) in the agent's process, each the median over the asks of its time since
the LLM's reply (``llm<``), and the median size of what each queue was sent. Wraps the
running code from outside, as ``ask_phases.py`` does; its arguments are
``agent_throughput.py``'s.

    OMP_NUM_THREADS=1 chrt -r 1 python benchmarks/answer_timeline.py --layout split \\
        --callers 1 --pause 0.2 --seconds 15 --phases
"""

from __future__ import annotations

import functools
import runpy
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import ask_phases

from react_mem.agent import ending
from react_mem.bus import pulsar
from react_mem.learner import service as learner
from react_mem.processor import flow
from react_mem.schema import base

SIZES: dict[str, list[int]] = defaultdict(list)
_install, _report = ask_phases.Phases.install, ask_phases.Phases.report


def _queue_name(producer: pulsar.PulsarProducer) -> str:
    """``non-persistent://tg/response/agent-<unique>:default:f1`` -> ``response:agent``."""
    cls, topic = str(producer._topic).split("/")[-2:]
    return f"{cls}:{topic.split(':')[0].rsplit('-', 1)[0]}"


def install(self: ask_phases.Phases, stack_class: type) -> None:
    _install(self, stack_class)
    marks = self.marks
    queue = pulsar.PulsarProducer.queue

    def stamped(producer: pulsar.PulsarProducer, data: bytes, properties: dict[str, str]) -> Any:
        name = _queue_name(producer)
        marks.append((time.perf_counter(), f"enq:{name}"))
        SIZES[name].append(len(data))
        receipt = queue(producer, data, properties)
        receipt.add_done_callback(lambda _: marks.append((time.perf_counter(), f"rcpt:{name}")))
        return receipt

    pulsar.PulsarProducer.queue = stamped  # type: ignore[method-assign]
    encode = base.WireModel.encode

    @functools.wraps(encode)
    def encoded(message: base.WireModel) -> bytes:
        began = time.perf_counter()
        data = encode(message)
        name = f"encode:{type(message).__name__}"
        marks.extend(((began, name + ">"), (time.perf_counter(), name + "<")))
        return data

    base.WireModel.encode = encoded  # type: ignore[method-assign]
    self._wrap(ending, "trajectory", "trajectory build")
    self._wrap(learner.MemoryLearnerProcessor, "on_trajectory", "learner")
    self._wrap(flow.Flow, "send_queued", "queued send")


def report(self: ask_phases.Phases, asks: int) -> None:
    _report(self, asks)
    times: dict[tuple[str, int], list[float]] = defaultdict(list)
    since: float | None = None
    seen: dict[str, int] = {}
    for stamp, mark in sorted(self.marks):
        if mark == "llm<":
            since, seen = stamp, {}
        elif since is not None:
            times[(mark, seen.get(mark, 0))].append((stamp - since) * 1000)
            seen[mark] = seen.get(mark, 0) + 1
            if mark == "ask<":
                since = None
    llm_ends = sum(1 for _, mark in self.marks if mark == "llm<")
    sizes = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in sorted(SIZES.items()))
    print(f"    median bytes sent per queue: {sizes}")
    print("    after the LLM's reply (median ms since llm<; mark #occurrence, asks with it):")
    rows = [(statistics.median(v), k, len(v)) for k, v in times.items() if len(v) >= llm_ends / 2]
    for median, (mark, n), count in sorted(rows):
        if median < 30:
            print(f"      {median:7.3f}  {mark} #{n} ({count})")


ask_phases.Phases.install = install  # type: ignore[method-assign]
ask_phases.Phases.report = report  # type: ignore[method-assign]
sys.argv = [str(Path(__file__).parent / "agent_throughput.py"), *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
