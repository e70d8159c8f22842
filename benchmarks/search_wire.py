"""CPU of the memory searches' wire messages, both ways, alternated in one process.

A recall sends fact, episode and playbook memory each a request carrying the question's
384 floats; each service decodes it and encodes its reply, which the agent decodes. This
times each step (thread CPU, median of ``--rounds`` rounds of ``--repeat`` calls) as the
code now does it and as it did before, alternately, so a busy machine inflates both alike:

- decoding: ``json.loads`` then validation (before), against pydantic-core's parser
  (``pydantic_core.from_json``) then the same validation (now; ``WireModel.decode``);
- a search's reply encoded by ``json.dumps`` of its dict (before) against pydantic-core
  (now; ``WireModel.compact``).

The requests are those of ``recall_cpu.py`` (the benchmark asks' question, a unit vector);
the replies hold ``--facts`` facts, 3 episodes and 8 bullets shaped as the services return
them.

    OMP_NUM_THREADS=1 python benchmarks/search_wire.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from recall_cpu import QUESTION, requests

from react_mem.schema import base
from react_mem.schema.base import WireModel
from react_mem.schema.episodes import Episode, EpisodeHits, EpisodeResponse
from react_mem.schema.facts import Fact, FactResponse
from react_mem.schema.playbook import Bullet, PlaybookResponse


def replies(facts: int) -> list[WireModel]:
    fact_list = [
        Fact(
            id=f"6b0c1d6e-2f1a-5c7e-9a3b-{n:012d}",
            content=f"The user's cousin lives in Krakow and works at the museum ({n}).",
            workspace="default",
            collection="default",
            user="user-2",
            source_conversation="conversation-7",
            created_at=1.7e9 + n * 61.5,
            updated_at=1.7e9 + n * 61.5,
            last_accessed=1.7e9 + 3.25,
            access_count=3,
            importance=0.5,
            confidence=0.9,
            content_hash=f"{n:064x}",
            score=0.61234 - n / 97,
        )
        for n in range(facts)
    ]
    episodes = [
        Episode(
            id=f"e-{n}",
            goal=QUESTION,
            outcome="success",
            score=0.8,
            lessons=["Ask for the city before the dates."],
            user="user-2",
            similarity=0.5 - n / 10,
        )
        for n in range(3)
    ]
    bullets = [
        Bullet(id=f"b-{n}", content="Check the stored facts before asking the user.", score=0.4)
        for n in range(8)
    ]
    return [
        FactResponse(facts=fact_list),
        EpisodeResponse(episodes=episodes, also=[EpisodeHits(episodes=episodes[:1])]),
        PlaybookResponse(bullets=bullets),
    ]


def _json_only() -> Callable[[], None]:
    """Decoding as before: the fast parser refusing everything, so ``json`` reads."""
    kept = base.from_json

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("json only")

    base.from_json = refuse  # type: ignore[assignment]

    def undo() -> None:
        base.from_json = kept  # type: ignore[assignment]

    return undo


def cpu(fn: Callable[[], object], repeat: int) -> float:
    began = time.thread_time()
    for _ in range(repeat):
        fn()
    return (time.thread_time() - began) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--facts", type=int, default=20)
    args = parser.parse_args()
    steps: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
    for message in requests():
        data, kind = message.encode(), type(message)
        steps[f"decode {kind.__name__} ({len(data)} B)"] = (
            lambda d=data, k=kind: k.decode(d),
            lambda d=data, k=kind: k.decode(d),
        )
    for message in replies(args.facts):
        kind = type(message)
        old = json.dumps(message.to_wire()).encode()
        new = message.encode()
        steps[f"encode {kind.__name__} ({len(old)} -> {len(new)} B)"] = (
            lambda m=message: json.dumps(m.to_wire()).encode("utf-8"),
            message.encode,
        )
        steps[f"decode {kind.__name__}"] = (
            lambda d=old, k=kind: k.decode(d),
            lambda d=new, k=kind: k.decode(d),
        )
    before: dict[str, list[float]] = {name: [] for name in steps}
    after: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, (old_fn, new_fn) in steps.items():
            undo = _json_only()
            try:
                before[name].append(cpu(old_fn, args.repeat))
            finally:
                undo()
            after[name].append(cpu(new_fn, args.repeat))
    print(f"{'step (us of CPU, median)':<52} {'before':>8} {'now':>8} {'ratio':>6}")
    for name in steps:
        b, a = statistics.median(before[name]) * 1e6, statistics.median(after[name]) * 1e6
        print(f"{name:<52} {b:8.1f} {a:8.1f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
