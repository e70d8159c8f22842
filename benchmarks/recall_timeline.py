"""An ask's recall, across processes: ``agent_throughput.py --layout split --phases`` (one
caller), plus a stamp at each step of every memory search, in the agent's process and in
each memory service's, on the system's monotonic clock (one clock for every process).

For each search the agent sends by the question's vector (facts, episodes, playbook) it
prints the median time, since the vector was ready (``embed<``), at which: the agent
encoded the request and handed it to the bus client (``sent``); the service's receive
loop got it (``in``) and its handler started (``settle``); the service decoded it
(``decoded``), encoded its reply (``reply>``, ``reply<``) and handed it to the bus
(``reply out``); the agent's response router got it (``back``) and decoded it
(``back decoded``); the source's items were ready (``done``). Also the median CPU
(``time.thread_time``) of each service's decode, handler (decode to reply handed over) and
the agent's decode of each reply. Wraps the running code from outside, as
``ask_phases.py`` does (the patches are made when this module is imported, so the split
layout's spawned children, which import it as their main module, make them too); its
arguments are ``agent_throughput.py``'s.

    OMP_NUM_THREADS=1 chrt -r 1 python benchmarks/recall_timeline.py --layout split \\
        --callers 1 --pause 0.2 --seconds 15 --phases

``RECALL_TIMELINE_SWITCH=SECONDS`` sets the GIL's switch interval in every process (an
experiment: 0.0002 moved none of the hops).
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.agent import recall
from react_mem.bus import pulsar
from react_mem.processor import consumer
from react_mem.schema import base

#: Where each process leaves its stamps (the parent names it before its children start).
_DIR = os.environ.get("RECALL_TIMELINE_DIR", "")
if not _DIR and __name__ == "__main__":
    _DIR = os.environ["RECALL_TIMELINE_DIR"] = tempfile.mkdtemp(prefix="recall-tl-")
#: (monotonic seconds, mark, correlation id, CPU seconds or None)
MARKS: list[tuple[float, str, str, float | None]] = []
_id: contextvars.ContextVar[str] = contextvars.ContextVar("tl_id", default="")
#: The agent's response router decodes right after its receive: the id it just got.
_routed = [""]
SEARCHES = frozenset({"fact-memory", "episode-memory", "playbook-memory"})


def _service(topic: str) -> str:
    name = topic.split("/")[-1].split(":")[0]
    return name.rsplit("-", 1)[0]


def _mark(mark: str, ident: str, cpu: float | None = None) -> None:
    MARKS.append((time.perf_counter(), mark, ident, cpu))


def _patch() -> None:
    queue = pulsar.PulsarProducer.queue

    def queued(producer: pulsar.PulsarProducer, data: bytes, properties: dict[str, str]) -> Any:
        _mark(f"enq:{_service(str(producer._topic))}", properties.get("id", ""))
        return queue(producer, data, properties)

    pulsar.PulsarProducer.queue = queued  # type: ignore[method-assign]
    receive = pulsar.PulsarConsumer.receive

    async def received(self: pulsar.PulsarConsumer) -> Any:
        delivery = await receive(self)
        ident = delivery.properties.get("id", "")
        _routed[0] = ident
        _mark(f"recv:{_service(str(self._topic))}", ident)
        return delivery

    pulsar.PulsarConsumer.receive = received  # type: ignore[method-assign]
    settle = consumer.ConsumerRunner._settle

    async def settled(self: consumer.ConsumerRunner, cons: Any, delivery: Any) -> None:
        ident = delivery.properties.get("id", "")
        _id.set(ident)
        _mark("settle", ident, time.thread_time())
        try:
            await settle(self, cons, delivery)
        finally:
            _mark("settled", ident, time.thread_time())

    consumer.ConsumerRunner._settle = settled  # type: ignore[method-assign]
    decode = base.WireModel.decode.__func__  # type: ignore[attr-defined]

    @classmethod  # type: ignore[misc]
    def decoded(cls: type[base.WireModel], data: bytes) -> Any:
        ident = _id.get() or _routed[0]
        began = time.thread_time()
        try:
            return decode(cls, data)
        finally:
            _mark(f"decoded:{cls.__name__}", ident, time.thread_time() - began)

    base.WireModel.decode = decoded  # type: ignore[method-assign]
    encode = base.WireModel.encode

    @functools.wraps(encode)
    def encoded(message: base.WireModel) -> bytes:
        ident = _id.get()
        _mark(f"encode>:{type(message).__name__}", ident, time.thread_time())
        try:
            return encode(message)
        finally:
            _mark(f"encode<:{type(message).__name__}", ident, time.thread_time())

    base.WireModel.encode = encoded  # type: ignore[method-assign]
    timed = recall.MemoryRecall._timed

    async def timed_source(self: recall.MemoryRecall, got: Any, name: str, job: Any) -> Any:
        _mark(f"start:{name}", "")
        try:
            return await timed(self, got, name, job)
        finally:
            _mark(f"done:{name}", "")

    recall.MemoryRecall._timed = timed_source  # type: ignore[method-assign]
    embed = recall.MemoryRecall._embed

    async def embedded(self: recall.MemoryRecall, question: str) -> Any:
        try:
            return await embed(self, question)
        finally:
            _mark("vector", "")

    recall.MemoryRecall._embed = embedded  # type: ignore[method-assign]

    def dump() -> None:
        if not _DIR:
            return
        path = Path(_DIR) / f"{os.getpid()}.json"
        path.write_text(json.dumps(MARKS))

    atexit.register(dump)


def report(directory: Path) -> None:
    marks: list[tuple[float, str, str, float | None]] = []
    for path in directory.glob("*.json"):
        marks.extend(tuple(m) for m in json.loads(path.read_text()))  # type: ignore[misc]
    marks.sort()
    by_id: dict[str, list[tuple[float, str, float | None]]] = defaultdict(list)
    for t, mark, ident, cpu in marks:
        if ident:
            by_id[ident].append((t, mark, cpu))
    steps: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    vectors = [t for t, mark, _, _ in marks if mark == "vector"]
    # Asks alone (the window's, a pause between them), not the warm-up's overlapping ones.
    alone = {
        t
        for before, t, after in zip(
            [0.0, *vectors[:-1]], vectors, [*vectors[1:], 1e18], strict=True
        )
        if t - before > 0.1 and after - t > 0.1
    }
    vector: float | None = None
    asked: set[str] = set()
    for t, mark, ident, _ in marks:
        if mark == "vector":
            vector, asked = (t if t in alone else None), set()
        elif vector is not None and mark.startswith(("done:", "start:")):
            step, name = mark.split(":")
            steps[name][step].append(t - vector)
        elif vector is not None and mark.startswith("enq:") and mark[4:] in SEARCHES - asked:
            name = mark[4:]  # the recall's request (a learner's comes later)
            asked.add(name)
            row = steps[name]
            row["sent"].append(t - vector)
            _request(row, by_id[ident], vector)
    print("recall's searches, median ms since the question's vector (CPU ms in brackets):")
    order = ["start", "sent", "in", "settle", "decoded", "reply>", "reply<", "reply out", "back"]
    order += ["back decoded", "done", "settled"]
    for name, row in sorted(steps.items()):
        shown = []
        for step in order:
            if row.get(step):
                shown.append(f"{step} {statistics.median(row[step]) * 1000:.2f}")
        steps_cpu = (
            "decode cpu",
            "handler cpu",
            "encode cpu",
            "after reply cpu",
            "back decode cpu",
        )
        for step in steps_cpu:
            if row.get(step):
                shown.append(f"[{step} {statistics.median(row[step]) * 1000:.2f}]")
        print(f"  {name} ({max(len(v) for v in row.values())}): " + ", ".join(shown))


def _request(
    row: dict[str, list[float]], stamps: list[tuple[float, str, float | None]], vector: float
) -> None:
    seen: dict[str, tuple[float, float | None]] = {}
    recvs = [s for s in stamps if s[1].startswith("recv:")]
    for t, mark, cpu in stamps:
        seen.setdefault(mark.split(":")[0], (t, cpu))
    if len(recvs) >= 2:  # the service's receive, then the agent's
        row["in"].append(recvs[0][0] - vector)
        row["back"].append(recvs[1][0] - vector)
    decodes = [s for s in stamps if s[1].startswith("decoded:")]
    if decodes:
        row["decoded"].append(decodes[0][0] - vector)
        row["decode cpu"].append(decodes[0][2] or 0.0)
    if len(decodes) >= 2:
        row["back decoded"].append(decodes[-1][0] - vector)
        row["back decode cpu"].append(decodes[-1][2] or 0.0)
    if "settle" in seen:
        row["settle"].append(seen["settle"][0] - vector)
    enc = [s for s in stamps if s[1].startswith("encode>")]
    enc_end = [s for s in stamps if s[1].startswith("encode<")]
    if enc and enc_end:
        row["reply>"].append(enc[0][0] - vector)
        row["reply<"].append(enc_end[0][0] - vector)
        row["encode cpu"].append((enc_end[0][2] or 0.0) - (enc[0][2] or 0.0))
        if "settle" in seen and seen["settle"][1] is not None:
            row["handler cpu"].append((enc_end[0][2] or 0.0) - seen["settle"][1])
    ends = [s for s in stamps if s[1] == "settled"]
    if ends and enc_end:
        row["settled"].append(ends[0][0] - vector)
        row["after reply cpu"].append((ends[0][2] or 0.0) - (enc_end[0][2] or 0.0))
    outs = [s for s in stamps if s[1].startswith("enq:")]
    if len(outs) >= 2:
        row["reply out"].append(outs[1][0] - vector)


_patch()
if os.environ.get("RECALL_TIMELINE_SWITCH"):  # an experiment: the GIL's switch interval
    sys.setswitchinterval(float(os.environ["RECALL_TIMELINE_SWITCH"]))

if __name__ == "__main__":
    # Imported, not run by path: this module stays ``__main__``, so the spawned children
    # import it (as ``__mp_main__``) and make the patches too.
    import agent_throughput

    agent_throughput.main()
    Path(_DIR, f"{os.getpid()}.json").write_text(json.dumps(MARKS))
    report(Path(_DIR))
