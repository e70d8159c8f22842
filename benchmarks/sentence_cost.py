"""What sentence vectors cost: embedding per turn, ingest rate, search latency, bytes stored.

Fact memory in process on the edge store with the real embedder, side by side with the
sentence vectors on and off (``FactPolicy.sentence_vectors``; the search's ``sentence_max``),
in alternating rounds, medians printed with their ratio:

- embedding: one conversation's turns embedded as ingest embeds them (the turns alone, or
  the turns and their sentences in the same call), milliseconds per turn;
- ingest: the same turns stored through ``FactMemory.store`` (checks, embedding, near-
  duplicate search, writes) into a fresh store each round, batches of ``--batch``, turns/s;
- search: hybrid retrievals of the conversation's questions over what was stored, p50 ms
  (and over the store with sentence vectors, not ranked by them: what their bytes cost);
- bytes: a record's payload (as JSON, mean), and the sentence vectors' value where held.

Turns are LoCoMo dialogue turns with speaker and session date, as ``locomo_recall.py``
stores them, read from ``../shared/eval/locomo-dev.json`` (never copied); without it, this
exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from locomo_recall import DEFAULT_DATA, turns

from memory_services.facts import records as rec
from memory_services.facts.fact_memory import FactMemory
from memory_services.store import sentences
from memory_services.store.base import Retrieval, Scope
from memory_services.store.edge import EdgeStore
from react_mem.embedding.sentence import SentenceTransformerEmbedder
from react_mem.schema.facts import FactInput

SCOPE = Scope("bench", "locomo", "ann")


async def embedding(embedder: SentenceTransformerEmbedder, texts: list[str], on: bool) -> float:
    started = time.perf_counter()
    parts = [part for text in texts for part in sentences.split(text)] if on else []
    await embedder.embed([*texts, *parts])
    return (time.perf_counter() - started) / len(texts) * 1000


async def ingest(
    embedder: SentenceTransformerEmbedder,
    root: Path,
    facts: list[FactInput],
    questions: list[str],
    batch: int,
    on: bool,
) -> tuple[float, float, float, float, float]:
    """Turns per second stored, search p50 ms (ranked as ``on`` says, and not by sentences),
    a record's payload bytes (JSON, mean), the mean sentence vectors' value bytes."""
    store = EdgeStore(root, flush_interval=3600)
    await store.open()
    memory = FactMemory(
        store,
        embedder,
        policy=rec.FactPolicy(near_duplicate_threshold=1.0, sentence_vectors=on),
        clock=time.time,
    )
    await memory.ensure()
    started = time.perf_counter()
    for first in range(0, len(facts), batch):
        await memory.store(SCOPE, facts[first : first + batch], sequence=True)
    rate = len(facts) / (time.perf_counter() - started)
    took: dict[bool, list[float]] = {True: [], False: []}
    for question in questions:  # ranked by sentences (where stored) and not, alternating
        for by in (on, False) if on else (False,):
            began = time.perf_counter()
            await memory.retrieve(
                SCOPE, query=question, top_k=10, retrieval=Retrieval(sentence_max=by)
            )
            took[by].append(time.perf_counter() - began)
    page, _ = await store.scroll(memory.ctx.collection, scope=SCOPE, limit=10_000)
    values = [len(str(r.payload[sentences.KEY])) for r in page if sentences.KEY in r.payload]
    held = statistics.fmean(len(json.dumps(r.payload)) for r in page)
    await memory.close()
    await store.close()
    unused = statistics.median(took[False]) * 1000
    return rate, statistics.median(took[on]) * 1000, unused, held, statistics.fmean(values or [0])


async def run(args: argparse.Namespace) -> None:
    data = json.loads(args.data.read_text())
    sample = data[args.conversation]
    facts = turns(sample)[: args.turns]
    texts = [fact.content for fact in facts]
    questions = [qa["question"] for qa in sample["qa"]][: args.questions]
    split = [sentences.split(text) for text in texts]
    print(
        f"{len(texts)} turns, {sum(map(len, split))} sentence texts "
        f"({sum(bool(s) for s in split)} turns of two sentences or more)"
    )
    embedder = SentenceTransformerEmbedder()
    await embedder.start()
    await embedding(embedder, texts[:64], True)  # warm up
    per_turn: dict[bool, list[float]] = {True: [], False: []}
    rates: dict[bool, list[float]] = {True: [], False: []}
    searches: dict[bool, list[float]] = {True: [], False: []}
    held: dict[bool, float] = {}
    unused: list[float] = []  # search p50 over the store with sentences, not ranked by them
    value = 0.0
    with tempfile.TemporaryDirectory(prefix="sentence-cost-") as tmp:
        for n in range(args.rounds):
            for on in (n % 2 == 0, n % 2 == 1):  # alternate which goes first
                per_turn[on].append(await embedding(embedder, texts, on))
                root = Path(tmp) / f"{n}-{on}"
                rate, search, plain, held[on], mean = await ingest(
                    embedder, root, facts, questions, args.batch, on
                )
                rates[on].append(rate)
                searches[on].append(search)
                if on:
                    unused.append(plain)
                value = mean if on else value
    rows = [
        ("embedding, ms per turn", per_turn),
        ("ingest, turns/s", rates),
        ("search p50, ms", searches),
    ]
    print(f"\n{'median of ' + str(args.rounds) + ' rounds':<28} {'off':>9} {'on':>9} {'on/off':>7}")
    for name, values in rows:
        off, on = statistics.median(values[False]), statistics.median(values[True])
        print(f"{name:<28} {off:>9.2f} {on:>9.2f} {on / off:>7.2f}")
    print(
        f"{'  same, sentences stored':<28} {statistics.median(unused):>9.2f} "
        f"{'':>9} (not ranked by them)"
    )
    print(f"{'payload bytes per record':<28} {held[False]:>9.0f} {held[True]:>9.0f}")
    print(f"sentence vectors per record that has them: {value:.0f} payload bytes (mean)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64, help="turns per store request")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to measure")
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
