"""Retrieval quality on LoCoMo through the fact-memory service: dense, lexical and hybrid side
by side, by question category (recall@k, all-evidence), with each retrieval's latency.

Every turn of a conversation is stored as one fact (speaker and session date prefixed,
``dia_id`` kept in metadata, the session date as ``valid_at``, the turn before as ``context``;
near-duplicate merging off, so each turn stays one memory) in a collection of its own, one
store request per session, marked ``sequence`` (its turns in order: neighbours). Each
question with evidence retrieves the top k over the bus once per ranking (the request's
``retrieval`` options), and counts as a hit when every evidence ``dia_id`` is among them. A
``+ctx`` column also counts the turns next to each hit (``--window`` each side, same session):
what a caller that brings a hit's neighbours sees. ``+sentences`` is the default ranking (the
dense side's candidates scored by their best sentence, whose vectors the service stores
beside each turn); the hybrid columns before it are asked without it. ``--also 20`` adds
recall@20 from a search of its own; ``--baseline`` counts the questions each column wins
and loses against one. The data (CC BY-NC 4.0, Maharana et al.,
ACL 2024) is read from ``../shared/eval/locomo-dev.json`` at run time and never copied;
without it, this exits. Tables are printed for all conversations and for each split:
``tune`` (the first two conversations, where rankings are chosen) and ``report`` (the other
three, where they are checked).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from memory_services.facts.records import SentencePooling
from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.clients.facts import FactClient
from react_mem.embedding.base import DEFAULT_BACKEND, EmbeddingBackend
from react_mem.errors import ReactMemError
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.retrieval import RetrievalOptions
from react_mem.schema.scope import Scope

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo-dev.json"
KS = (5, 10)
#: LoCoMo's question categories, by the number the data gives them.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
#: Conversations in the tuning split (the rest are the report split).
TUNE = 2
RANKINGS: dict[str, RetrievalOptions] = {
    "dense": RetrievalOptions(mode="dense"),
    "lexical": RetrievalOptions(mode="lexical"),
    # lexical with the time boost: both hybrid lists, the dense one weighted 0
    "lexical+time": RetrievalOptions(
        mode="hybrid", dense_weight=0.0, neighbour_lift=0.0, priors=False, sentences=False
    ),
    "hybrid": RetrievalOptions(
        mode="hybrid", time_boost=False, neighbour_lift=0.0, priors=False, sentences=False
    ),
    "hybrid-dbsf": RetrievalOptions(
        mode="hybrid",
        fusion="dbsf",
        time_boost=False,
        neighbour_lift=0.0,
        priors=False,
        sentences=False,
    ),
    "hybrid+time": RetrievalOptions(
        mode="hybrid", neighbour_lift=0.0, priors=False, sentences=False
    ),
    # neighbours lifted, without the priors on a fact's text (the default until 2026-11-28)
    "hybrid+time+nb": RetrievalOptions(mode="hybrid", priors=False, sentences=False),
    "hybrid+time+nb+priors": RetrievalOptions(mode="hybrid", sentences=False),
    # the dense side scores a turn by its best sentence too (each stored with its vector)
    "+sentences": RetrievalOptions(mode="hybrid", sentences=True),
}


def session_time(text: str) -> float | None:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") in epoch seconds (UTC)."""
    try:
        return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def said(turn: dict[str, Any], captions: bool) -> str:
    """A turn's words; with ``captions``, as LoCoMo's own retrieval code indexes a turn that
    shares a photo: its text, then `` and shared `` and the photo's caption."""
    caption = turn.get("blip_caption") if captions else None
    return f"{turn['text']} and shared {caption}" if caption else str(turn["text"])


def turns(sample: dict[str, Any], captions: bool = False) -> list[FactInput]:
    conversation, facts = sample["conversation"], []
    for key, session in conversation.items():
        if key.startswith("session_") and isinstance(session, list):
            date, before = conversation.get(f"{key}_date_time", ""), ""
            for turn in session:
                words = said(turn, captions)
                text = f"{turn['speaker']} ({date}): {words}"
                facts.append(
                    FactInput(
                        content=text,
                        metadata={"dia_id": turn["dia_id"]},
                        valid_at=session_time(date),
                        context=before,  # the turn it answers: its words find this one too
                    )
                )
                before = words
    return facts


def sessions(facts: list[FactInput], most: int = 64) -> list[list[FactInput]]:
    """``facts`` (one conversation's turns, in order) as store requests: one per session,
    a long session cut every ``most`` turns."""
    requests: list[list[FactInput]] = []
    last = None
    for fact in facts:
        session = fact.metadata["dia_id"].rpartition(":")[0]
        if session != last or len(requests[-1]) >= most:
            requests.append([])
        requests[-1].append(fact)
        last = session
    return requests


def neighbours(found: list[str], window: int) -> set[str]:
    """The dia_ids ``found`` and those up to ``window`` turns either side in their session."""
    near = set(found)
    for dia in found:
        session, _, number = dia.rpartition(":")
        if number.isdigit():
            near.update(f"{session}:{int(number) + d}" for d in range(-window, window + 1))
    return near


class Tally:
    def __init__(self, ks: tuple[int, ...] = KS) -> None:
        self.ks = ks
        self.hits: dict[tuple[str, str, int], int] = defaultdict(int)
        self.questions: dict[str, int] = defaultdict(int)
        self.latencies: dict[str, list[float]] = defaultdict(list)

    def add(
        self,
        column: str,
        category: str,
        found: list[str],
        evidence: list[str],
        ks: tuple[int, ...] | None = None,
    ) -> None:
        for name in (category, "all"):
            for k in self.ks if ks is None else ks:
                self.hits[column, name, k] += all(e in found[:k] for e in evidence)

    def table(self, columns: list[str]) -> str:
        width = 8 * len(self.ks)
        head = f"{'category':<12} {'n':>4}  " + "  ".join(f"{c:>{width}}" for c in columns)
        ats = "".join(f"{'@' + str(k):>8}" for k in self.ks)
        rows = [head, f"{'':<12} {'':>4}  " + "  ".join(ats for _ in columns)]
        for name in [*CATEGORIES.values(), "all"]:
            n = self.questions[name]
            if not n:
                continue
            cells = [
                "".join(f"{self.hits[c, name, k] / n:>8.3f}" for k in self.ks) for c in columns
            ]
            rows.append(f"{name:<12} {n:>4}  " + "  ".join(cells))
        return "\n".join(rows)


@asynccontextmanager
async def fact_memory(
    url: str, tmp: Path, backend: EmbeddingBackend, **settings: object
) -> AsyncIterator[FactClient]:
    """The fact-memory service on the broker at ``url`` (in this process, store under
    ``tmp``, near-duplicate merging off, ``settings`` over these), and a client of it."""
    bus = PulsarTransport(PulsarOptions(url=url))
    await bus.connect()
    topics = {
        "request": "request:tg:fact-memory:eval:f",
        "response": "response:tg:fact-memory:eval:f",
    }
    flows = tmp / "flows.yaml"
    flows.write_text(json.dumps({"eval": {"processor:fact-eval": {"f": {"topics": topics}}}}))
    service = FactMemoryProcessor(
        FactMemoryProcessor.Settings.load(
            {
                "id": "fact-eval",
                "flows": flows,
                "data_dir": tmp / "facts",
                "state_dir": tmp,
                "near_duplicate_threshold": 1.0,
                "embedding_backend": backend,
                "concurrency": 4,
                **settings,
            }
        ),
        bus,
    )
    await service.start()
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        bus, topics["request"], topics["response"], FactResponse, timeout=120
    )
    await client.start()
    try:
        yield FactClient(client)
    finally:
        await client.close()
        await service.stop()
        await bus.close()


async def evaluate(
    data: list[dict[str, Any]],
    url: str,
    tmp: Path,
    backend: EmbeddingBackend,
    window: int,
    rankings: dict[str, RetrievalOptions],
    ks: tuple[int, ...] = KS,
    also: tuple[int, ...] = (),
    baseline: str | None = None,
    pooling: str = "separate",
    captions: bool = False,
) -> dict[str, list[list[str]]]:
    """Print the table; return each question's top k per column. ``also``: recall@k from a
    search of k of its own, for each (a deeper search's candidates differ); ``baseline``:
    print how many questions each column wins and loses against that one; ``captions``:
    turns that share a photo are stored with its caption (:func:`said`)."""
    every = (*ks, *also)
    tally = Tally(every)
    splits = {"tune": Tally(every), "report": Tally(every)}  # before TUNE, the rest
    ranked: dict[str, list[list[str]]] = defaultdict(list)  # what --dump writes
    searches = [(max(ks), ks), *((k, (k,)) for k in also)]
    #: Per question: its split and category, and per (column, k) whether it was a hit.
    asked: list[tuple[str, str]] = []
    outcome: dict[tuple[str, int], list[bool]] = defaultdict(list)
    async with fact_memory(url, tmp, backend, sentence_pooling=pooling) as memory:
        for number, sample in enumerate(data):
            collection, facts = f"locomo-{sample['sample_id']}", turns(sample, captions)
            where = Scope("eval", collection)
            for request in sessions(facts):
                try:
                    await memory.store(where, request, sequence=True)
                except ReactMemError as exc:
                    sys.exit(f"store failed: {exc}")
            tallies = (tally, splits["tune" if number < TUNE else "report"])
            for qa in sample["qa"]:
                if not qa.get("evidence") or "answer" not in qa:
                    continue
                category = CATEGORIES.get(qa["category"], str(qa["category"]))
                asked.append(("tune" if number < TUNE else "report", category))
                for one in tallies:
                    one.questions[category] += 1
                    one.questions["all"] += 1
                for column, options in rankings.items():
                    for size, group in searches:
                        started = time.perf_counter()
                        hits = await memory.retrieve(
                            where, qa["question"], top_k=size, retrieval=options
                        )
                        found = [f.metadata.get("dia_id", "") for f in hits]
                        for k in group:
                            outcome[column, k].append(all(e in found[:k] for e in qa["evidence"]))
                        for one in tallies:
                            one.add(column, category, found, qa["evidence"], group)
                        if size != max(ks):
                            continue
                        tally.latencies[column].append(time.perf_counter() - started)
                        ranked[column].append(found)
                    if column == "hybrid" and window:
                        for k in ks:  # the k hits and their neighbours
                            near = neighbours(found[:k], window)
                            for one in tallies:
                                for name in (category, "all"):
                                    one.hits["hybrid+ctx", name, k] += all(
                                        e in near for e in qa["evidence"]
                                    )
            print(f"  {collection}: {len(facts)} turns stored", flush=True)
    columns = [*rankings, *(["hybrid+ctx"] if window and "hybrid" in rankings else [])]
    at = " / ".join(f"@{k}" for k in ks)
    print(f"\n{tally.questions['all']} questions over {len(data)} conversations, recall{at}")
    print(tally.table(columns))
    for name, one in splits.items():
        if one.questions["all"]:
            print(f"\n{name} split: {one.questions['all']} questions")
            print(one.table(columns))
    if window:
        print(f"(hybrid+ctx: the k hits and {window} turn(s) either side of each)")
    if baseline in rankings:
        print(f"\nquestions won / lost against {baseline}:")
        for column in rankings:
            if column != baseline:
                print(f"  {column}: " + won_lost(asked, outcome, column, baseline, every))
    print("\nretrieval latency through the bus (ms):")
    for column, values in tally.latencies.items():
        values.sort()
        p50, p99 = statistics.median(values), values[int(len(values) * 0.99)]
        print(f"  {column:<12} p50 {p50 * 1000:6.1f}  p99 {p99 * 1000:6.1f}")
    if importlib.util.find_spec("mem0") is None:
        print("mem0: side by side in benchmarks/vs_mem0.py (its own virtual environment)")
    return ranked


def won_lost(
    asked: list[tuple[str, str]],
    outcome: dict[tuple[str, int], list[bool]],
    column: str,
    baseline: str,
    ks: tuple[int, ...],
) -> str:
    """Per split and k, the questions ``column`` finds and ``baseline`` misses (+) and the
    other way round (-); at the middle k, per category too."""
    parts = []
    for split in ("tune", "report"):
        cells = []
        for k in ks:
            pairs = zip(outcome[column, k], outcome[baseline, k], asked, strict=True)
            mine = [(c, b) for c, b, (s, _) in pairs if s == split]
            won, lost = sum(c and not b for c, b in mine), sum(b and not c for c, b in mine)
            cells.append(f"@{k} +{won}/-{lost}")
        k = ks[len(ks) // 2]
        by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for c, b, (s, category) in zip(
            outcome[column, k], outcome[baseline, k], asked, strict=True
        ):
            if s == split:
                by[category][0] += c and not b
                by[category][1] += b and not c
        each = ", ".join(f"{name} +{w}/-{lo}" for name, (w, lo) in sorted(by.items()))
        parts.append(f"{split} {' '.join(cells)} (@{k}: {each})")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--backend",
        choices=get_args(EmbeddingBackend),
        default=DEFAULT_BACKEND,
        help="embedding backend",
    )
    parser.add_argument("--window", type=int, default=1, help="neighbours each side (+ctx)")
    parser.add_argument("--limit", type=int, default=0, help="first N conversations (0: all)")
    parser.add_argument(
        "--rankings",
        default=",".join(RANKINGS),
        help=f"columns, comma-separated (default: all of {', '.join(RANKINGS)})",
    )
    parser.add_argument(
        "--ks",
        default=",".join(map(str, KS)),
        help="recall@k for these k (one retrieval of the largest: a hybrid search's candidates "
        "grow with it, so its first 10 may differ from a top-10 search's)",
    )
    parser.add_argument(
        "--also",
        default="",
        help="recall@k for these k too, each from a search of k of its own (e.g. 20)",
    )
    parser.add_argument(
        "--baseline", help="print questions won and lost by each column against this one"
    )
    parser.add_argument(
        "--sentence-pooling",
        choices=get_args(SentencePooling),
        default="separate",
        help="how the service makes sentence vectors (late: from the fact's own model run)",
    )
    parser.add_argument(
        "--captions",
        action="store_true",
        help="store a turn that shares a photo with the photo's caption, as LoCoMo's own "
        "retrieval evaluation does (default: the turn's text alone)",
    )
    parser.add_argument(
        "--dump", type=Path, help="write each question's top k per column here (JSON)"
    )
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to evaluate")
        return
    data = json.loads(args.data.read_text())
    if args.limit:
        data = data[: args.limit]
    with (
        tempfile.TemporaryDirectory(prefix="locomo-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker") as broker,
    ):
        print(
            f"embedding backend: {args.backend}, sentence pooling: {args.sentence_pooling}, "
            f"photo captions: {'stored' if args.captions else 'left out'}"
        )
        rankings = {name: RANKINGS[name] for name in args.rankings.split(",")}
        ranked = asyncio.run(
            evaluate(
                data,
                broker.url,
                Path(tmp),
                args.backend,
                args.window,
                rankings,
                tuple(int(k) for k in args.ks.split(",")),
                tuple(int(k) for k in args.also.split(",") if k),
                args.baseline,
                args.sentence_pooling,
                args.captions,
            )
        )
    if args.dump:
        args.dump.write_text(json.dumps(ranked))


if __name__ == "__main__":
    main()
