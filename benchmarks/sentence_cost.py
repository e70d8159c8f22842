"""What sentence vectors cost: embedding per turn, ingest rate, search latency, bytes stored.

Fact memory in process on the edge store with the real embedder, side by side with the
sentence vectors off and made each way ``--modes`` names (``FactPolicy.sentence_vectors``
and ``sentence_pooling``: "separate", each sentence embedded alone; "late"/"late-label",
pooled from the fact's own model run; the search's ``sentence_max``), in rotating rounds,
medians printed with their ratio to off:

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


#: The columns: one vector per fact, then the ways of making sentence vectors.
OFF = "off"


async def embedding(embedder: SentenceTransformerEmbedder, texts: list[str], mode: str) -> float:
    started = time.perf_counter()
    if mode in (OFF, "separate"):
        parts = [p for text in texts for p in sentences.split(text)] if mode != OFF else []
        await embedder.embed([*texts, *parts])
    else:  # late chunking: one model run per text
        label = mode == "late-label"
        await embedder.embed_spans(texts, [sentences.spans(t, label=label) for t in texts])
    return (time.perf_counter() - started) / len(texts) * 1000


async def ingest(
    embedder: SentenceTransformerEmbedder,
    root: Path,
    facts: list[FactInput],
    questions: list[str],
    batch: int,
    mode: str,
) -> tuple[float, float, float, float, float]:
    """Turns per second stored, search p50 ms (ranked as ``on`` says, and not by sentences),
    a record's payload bytes (JSON, mean), the mean sentence vectors' value bytes."""
    on = mode != OFF
    store = EdgeStore(root, flush_interval=3600)
    await store.open()
    memory = FactMemory(
        store,
        embedder,
        policy=rec.FactPolicy(
            near_duplicate_threshold=1.0,
            sentence_vectors=mode != OFF,
            sentence_pooling="separate" if mode == OFF else mode,  # type: ignore[arg-type]
        ),
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
    modes = [OFF, *args.modes.split(",")]
    embedder = SentenceTransformerEmbedder()
    await embedder.start()
    for mode in modes:
        await embedding(embedder, texts[:64], mode)  # warm up
    per_turn: dict[str, list[float]] = {m: [] for m in modes}
    rates: dict[str, list[float]] = {m: [] for m in modes}
    searches: dict[str, list[float]] = {m: [] for m in modes}
    held: dict[str, float] = {}
    unused: dict[str, list[float]] = {m: [] for m in modes}  # stored, not ranked by them
    value: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="sentence-cost-") as tmp:
        for n in range(args.rounds):
            shift = n % len(modes)  # rotate which goes first
            for mode in modes[shift:] + modes[:shift]:
                per_turn[mode].append(await embedding(embedder, texts, mode))
                root = Path(tmp) / f"{n}-{mode}"
                rate, search, plain, held[mode], value[mode] = await ingest(
                    embedder, root, facts, questions, args.batch, mode
                )
                rates[mode].append(rate)
                searches[mode].append(search)
                unused[mode].append(plain)
    rows = [
        ("embedding, ms per turn", per_turn),
        ("ingest, turns/s", rates),
        ("search p50, ms", searches),
        ("  same, not ranked by them", unused),
    ]
    head = "".join(f"{m:>11}" for m in modes) + "".join(f"{m + '/off':>15}" for m in modes[1:])
    print(f"\n{'median of ' + str(args.rounds) + ' rounds':<28}{head}")
    for name, values in rows:
        middle = [statistics.median(values[m]) for m in modes]
        ratios = "".join(f"{m / middle[0]:>15.2f}" for m in middle[1:])
        print(f"{name:<28}" + "".join(f"{m:>11.2f}" for m in middle) + ratios)
    print(f"{'payload bytes per record':<28}" + "".join(f"{held[m]:>11.0f}" for m in modes))
    print(
        "sentence vectors per record that has them, payload bytes (mean): "
        + ", ".join(f"{m} {value[m]:.0f}" for m in modes[1:])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64, help="turns per store request")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--modes",
        default="separate",
        help="sentence vectors made these ways beside one vector per fact, comma-separated "
        "(separate, late, late-label; late: pooled from the fact's own model run)",
    )
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to measure")
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
