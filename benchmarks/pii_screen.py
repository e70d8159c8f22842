"""What the PII screen costs: start-up, memory, and time per stored text.

Measures, in this process: importing Presidio and building the detector (seconds, RSS
growth), then the median time of one text through ``Detector.find`` + ``redact`` (what a
service does per stored field) for short and long texts with and without PII, and of
``PiiGuard.screen`` on a ``store`` request of 10 facts (the thread hop included). Texts come
from the tests' generators (fixed seed).

Then the false-positive rate on real conversation: every turn of the LoCoMo dev
conversations (read from ``../shared/eval/locomo-dev.json`` at run time, never copied; no
turn there holds a real identifier), folded as the screen folds it, and the share flagged
at all and per entity type. ``--show`` prints the flagged spans (the public data's words).

    OMP_NUM_THREADS=1 python benchmarks/pii_screen.py [--rounds 200] [--show 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from react_mem.text import fold
from tests.support.pii_values import ordinary, sentence

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo-dev.json"

KINDS = ("card", "ssn", "iban", "email", "phone", "api_key")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def median_us(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--show", type=int, default=0, help="print this many flagged spans")
    args = parser.parse_args()
    rng = random.Random(13)

    before, began = rss_mib(), time.perf_counter()
    from memory_services.pii.engine import Detector

    imported = time.perf_counter()
    detector = Detector()
    built = time.perf_counter()
    print(
        f"import Presidio: {imported - began:.2f} s; build detector: {built - imported:.2f} s; "
        f"RSS +{rss_mib() - before:.0f} MiB; torch imported: {'torch' in sys.modules}"
    )

    from memory_services.pii.guard import PiiGuard
    from memory_services.pii.policy import PiiPolicy
    from react_mem.schema.facts import FactInput, FactRequest

    policy = PiiPolicy()
    clean_short = [ordinary(rng) for _ in range(50)]
    pii_short = [sentence(rng, rng.choice(KINDS))[0] for _ in range(50)]
    clean_long = [" ".join(ordinary(rng) for _ in range(16)) for _ in range(20)]
    pii_long = [
        " ".join(ordinary(rng) for _ in range(14))
        + " "
        + sentence(rng, "email")[0]
        + " "
        + sentence(rng, "card")[0]
        for _ in range(20)
    ]
    print(f"{'texts':<34}{'chars':>7}{'median µs':>11}")
    for name, texts in (
        ("short, no PII", clean_short),
        ("short, one value", pii_short),
        ("~1 KB, no PII", clean_long),
        ("~1 KB, two values", pii_long),
    ):
        cycle = iter(texts * (args.rounds // len(texts) + 1))

        def one(cycle: Iterator[str] = cycle) -> object:
            text = next(cycle)
            return detector.redact(text, detector.find(text, policy.entities, policy.threshold))

        chars = statistics.median(len(t) for t in texts)
        print(f"{name:<34}{chars:>7.0f}{median_us(one, args.rounds):>11.0f}")

    for size in (64_000, 500_000):  # a long answer; an episode near its byte limit
        parts: list[str] = []
        while sum(len(p) + 1 for p in parts) < size:
            kind = rng.choice(("card", "email", "phone"))
            parts.append(ordinary(rng) if rng.random() < 0.9 else sentence(rng, kind)[0])
        text = " ".join(parts)

        def long_one(text: str = text) -> object:
            return detector.redact(text, detector.find(text, policy.entities, policy.threshold))

        print(
            f"{f'{size // 1000} KB, 1 in 10 sentences a value':<34}{len(text):>7}"
            f"{median_us(long_one, 3):>11.0f}"
        )

    guard = PiiGuard("bench", policy)
    request = FactRequest(
        operation="store", facts=[FactInput(content=t) for t in clean_short[:5] + pii_short[:5]]
    )

    async def screens() -> list[float]:
        await guard.start()
        times = []
        for _ in range(max(args.rounds // 10, 10)):
            start = time.perf_counter()
            await guard.screen("ws", request)
            times.append(time.perf_counter() - start)
        return times

    times = asyncio.run(screens())
    print(f"{'PiiGuard.screen, 10 facts':<34}{'':>7}{statistics.median(times) * 1e6:>11.0f}")
    if args.locomo.exists():
        false_positives(detector, policy, args.locomo, args.show)
    else:
        print(f"no {args.locomo}: false-positive rate not measured")


def locomo_turns(path: Path) -> list[str]:
    """Each turn as ``benchmarks/locomo_recall.py`` stores it: speaker and session date
    first ("Caroline (1:56 pm on 8 May, 2023): ..."), so dates are in every text."""
    turns = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        for key, session in conversation.items():
            if key.startswith("session_") and isinstance(session, list):
                date = conversation.get(f"{key}_date_time", "")
                turns += [f"{turn['speaker']} ({date}): {turn['text']}" for turn in session]
    return turns


def false_positives(detector: object, policy: object, path: Path, show: int) -> None:
    from memory_services.pii.engine import Detector
    from memory_services.pii.policy import PiiPolicy

    assert isinstance(detector, Detector) and isinstance(policy, PiiPolicy)
    turns = locomo_turns(path)
    flagged, by_entity, spans = 0, Counter[str](), []
    for text in turns:
        folded = fold(text)
        found = detector.find(folded, policy.entities, policy.threshold)
        flagged += bool(found)
        for entity in {f.entity for f in found}:
            by_entity[entity] += 1
        spans += [(f.entity, folded[f.start : f.end]) for f in found]
    print(
        f"LoCoMo dev turns flagged (false positives): {flagged} of {len(turns)} "
        f"({100 * flagged / len(turns):.2f}%)"
    )
    for entity in sorted(policy.entities):
        share = 100 * by_entity[entity] / len(turns)
        print(f"  {entity:<16}{by_entity[entity]:>5} turns ({share:.2f}%)")
    for entity, span in spans[:show]:
        print(f"  {entity}: {span!r}")


if __name__ == "__main__":
    main()
