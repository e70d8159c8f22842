"""CPU of the agent's own steps between a recall's embedding and its LLM call, both ways.

Two cuts, each timed against what it replaced, alternated in one process (thread CPU,
median of ``--rounds`` rounds of ``--repeat`` calls each), so a busy machine inflates both
sides alike:

- a recall request's encoding (fact, episode and playbook memory each get the question's
  384 floats): ``json.dumps`` of the whole message, as before, against ``WireModel.encode``,
  which writes the vector with pydantic-core;
- the memory section's render (``prompt.render_context``) of items recall did not count
  against items it counted (``Item.tokens``, counted while recall waited for other sources:
  the counting's own CPU is printed too).

The items are those of ``agent_throughput.py``'s asks (two facts, a summary and two turns);
the vector is a unit vector of seeded random floats.

    OMP_NUM_THREADS=1 python benchmarks/recall_cpu.py
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.agent import prompt
from react_mem.agent.items import Item, conversation_items, fact_items
from react_mem.agent.sources import Sources
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema.base import WireModel
from react_mem.schema.conversations import Conversation, ConversationTurn
from react_mem.schema.episodes import EpisodeRequest
from react_mem.schema.facts import Fact, FactRequest
from react_mem.schema.playbook import PlaybookRequest
from react_mem.tokens import HFTokenCounter

QUESTION = "Which city does my cousin live in these days, and who else lives there?"


def vector(seed: int = 7, dimension: int = 384) -> list[float]:
    """A unit vector of float32 values, as the embedder gives (``.tolist()`` of float32)."""
    import numpy as np

    rng = random.Random(seed)
    raw = np.asarray([rng.gauss(0, 1) for _ in range(dimension)], dtype=np.float32)
    unit: list[float] = (raw / np.linalg.norm(raw)).astype(np.float32).tolist()
    return unit


def requests() -> list[WireModel]:
    v = vector()
    owner = {"collection": "default", "user": "user-2"}
    return [
        FactRequest(operation="retrieve", query=QUESTION, vector=v, top_k=20, **owner),
        EpisodeRequest(operation="retrieve", query=QUESTION, vector=v, top_k=3, **owner),
        PlaybookRequest(operation="retrieve", query=QUESTION, vector=v, top_k=10, **owner),
    ]


def sections() -> dict[str, list[Item]]:
    facts = [
        Fact(id=f"f{n}", content=text, user="user-2", score=0.2)
        for n, text in enumerate(
            (
                "The user's cousin lives in Krakow (note 2-4).",
                "The user's landlord lives in Valparaiso (note 2-0).",
            )
        )
    ]
    asked = (
        "Please remember that my sister lives in Lisbon (note 0-0).",
        "Can you help me plan a birthday gift with my dentist in Osaka?",
    )
    answer = "Here is a short answer."
    turns = [
        ConversationTurn(
            turn_id=f"t{n}",
            sequence=n,
            query=q,
            answer=answer,
            summary=f"User asked: {q} Agent answered: {answer}",
        )
        for n, q in enumerate(asked)
    ]
    summary = "\n".join(f"User asked: {q} Agent answered directly. Result: {answer}" for q in asked)
    conversation = Conversation(conversation_id="c", summary=summary, turns=turns)
    return {"facts": fact_items(facts), "conversation": conversation_items(conversation, 5)}


def cpu(call: Callable[[], object], repeat: int, rounds: int) -> list[float]:
    """Microseconds of thread CPU per call, one figure per round."""
    figures = []
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(repeat):
            call()
        figures.append((time.thread_time() - started) / repeat * 1e6)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    before_total = after_total = 0.0
    for message in requests():
        before, after = [], []
        for _ in range(args.rounds):  # alternated, one round each way at a time
            before += cpu(lambda m=message: json.dumps(m.to_wire()).encode(), args.repeat, 1)
            after += cpu(message.encode, args.repeat, 1)
        assert json.loads(message.encode()) == json.loads(json.dumps(message.to_wire()))
        b, a = statistics.median(before), statistics.median(after)
        before_total, after_total = before_total + b, after_total + a
        print(f"encode {type(message).__name__:16} json.dumps {b:6.1f} us, now {a:6.1f} us")
    print(f"the three requests: {before_total:.0f} -> {after_total:.0f} us")

    counter = HFTokenCounter.from_file()
    layout = prompt.Layout.of(Sources.of(MemoryKinds.from_entry_points()))
    plain = sections()
    counted = {
        name: [Item(i.text, i.ref, i.group, counter.count(i.text)) for i in items]
        for name, items in plain.items()
    }
    budget = 2000
    expected = prompt.render_context(counter, budget, plain, layout)
    assert prompt.render_context(counter, budget, counted, layout) == expected
    render_plain, render_counted, counting = [], [], []
    for _ in range(args.rounds):
        render_plain += cpu(
            lambda: prompt.render_context(counter, budget, plain, layout), args.repeat, 1
        )
        render_counted += cpu(
            lambda: prompt.render_context(counter, budget, counted, layout), args.repeat, 1
        )
        counting += cpu(
            lambda: [counter.count(i.text) for items in plain.values() for i in items],
            args.repeat,
            1,
        )
    print(
        f"render: items uncounted {statistics.median(render_plain):.0f} us, counted in recall "
        f"{statistics.median(render_counted):.0f} us (their counting, moved into recall's "
        f"wait: {statistics.median(counting):.0f} us)"
    )


if __name__ == "__main__":
    main()
