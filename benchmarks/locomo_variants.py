"""Ranking variants on LoCoMo, side by side on the tuning and the report split, in seconds.

``locomo_recall.py`` measures rankings through the fact-memory service; trying a dozen ideas
that way costs minutes each on a small machine. This script rebuilds what the store ranks
from, in process: each turn's vector from the same embedder, its BM25 terms from the same
tokeniser (``memory_services.store.lexical``) with IDF over the records stored so far, the
same time and slot boosts as ``FactMemory.retrieve``, and the store's own fusion
(``memory_services.store.ties.fuse``, neighbours and ties included), so its ``hybrid+time``
columns match ``locomo_recall.py``'s. Variants the store does not implement are applied to
the fused scores here: a session lift (records of a session holding several hits gain),
a name boost (the lexical list again, over the turns of a person the question names),
lexical pseudo-relevance feedback (the top hits' rarest terms added to the query) and
dense pseudo-relevance feedback (the top hits' vectors added to the query's).

The variants run without the priors on a fact's text (``BEFORE``; they were measured before
them), but for ``+nb +priors (default)``. For each variant it prints recall@5 / @10 / @20
(all evidence turns among the first k), all questions and multi-hop, per split, and how
many questions it wins and loses against the first variant (``--categories``: then @10 per
category and split). The vectors are cached in ``--cache`` (default: none). The data (CC
BY-NC 4.0, Maharana et al., ACL 2024) is read from ``../shared/eval/locomo-dev.json`` and
never copied.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from locomo_recall import CATEGORIES, DEFAULT_DATA, TUNE, sessions, turns

from memory_services import when
from memory_services.facts import changes, slots
from memory_services.facts.fact_memory import TOLD
from memory_services.store import lexical, ties
from memory_services.store.base import Retrieval
from react_mem.embedding.sentence import SentenceTransformerEmbedder

KS = (5, 10, 20)
WIDTH = 36  # of a variant's name in the tables
#: The ranking before the priors on a fact's text (the variants below were measured on it).
BEFORE: dict[str, Any] = {"ask_discount": 0.0, "length_prior": 0.0}
NAME = re.compile(r"\b[A-Z][a-z]+\b")
#: A name inside a sentence (not its first word).
CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")


@dataclass
class Point:
    id: str
    score: float
    payload: dict[str, Any]


@dataclass
class Conversation:
    texts: list[str]
    dia: list[str]
    payloads: list[dict[str, Any]]
    vectors: np.ndarray
    docs: list[dict[int, float]]
    questions: list[dict[str, Any]]
    question_vectors: np.ndarray
    idf: dict[int, float] = field(default_factory=dict)
    postings: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    asked: dict[str, np.ndarray] = field(default_factory=dict)

    def bm25(self, text: str) -> np.ndarray:
        """Each record's BM25 score for ``text`` (remembered: variants ask alike)."""
        if text not in self.asked:
            if not self.postings:
                for n, doc in enumerate(self.docs):
                    for term, weight in doc.items():
                        self.postings.setdefault(term, []).append((n, weight))
            scores = np.zeros(len(self.docs))
            for term in set(lexical.query(text)[0]):
                for n, weight in self.postings.get(term, ()):
                    scores[n] += weight * self.idf.get(term, 0.0)
            self.asked[text] = scores
        return self.asked[text]

    def boost(self, question: str, now: float) -> np.ndarray | None:
        """The records ``FactMemory.retrieve`` boosts for ``question`` (None: no boost)."""
        key = slots.asked(question)
        if key is not None:
            return np.array([p.get("slot") == key for p in self.payloads])
        if span := when.span(question, now, after=TOLD):
            at = np.array([p.get("valid_at") or 0.0 for p in self.payloads])
            return (at >= span[0]) & (at < span[1])
        if when.asks_when(question):
            return np.array([when.tells_time(t) for t in self.texts])
        return None


async def load(data: list[dict[str, Any]], saved: Any, cache: Path | None) -> list[Conversation]:
    """The conversations as the store would hold them (vectors from ``saved`` if given)."""
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", backend="onnx-int8")
    if saved is None:
        await embedder.start()
    out, arrays, df, stored = [], {}, defaultdict(int), 0
    for n, sample in enumerate(data):
        texts, dia, payloads, docs = [], [], [], []
        for thread, request in enumerate(sessions(turns(sample))):
            for seq, fact in enumerate(request):
                texts.append(fact.content)
                dia.append(fact.metadata["dia_id"])
                payloads.append(
                    {
                        "thread": f"{n}-{thread}",
                        "seq": seq,
                        "valid_at": fact.valid_at,
                        "content": fact.content,  # what the priors read
                    }
                    | changes.slot_of(fact.content)
                )
                fields = {"content": fact.content, "context": fact.context}
                terms = lexical.document(lexical.record_text(fields, ("content", "context")))
                docs.append(dict(zip(*terms, strict=True)))
        asked = [qa for qa in sample["qa"] if qa.get("evidence") and "answer" in qa]
        if saved is not None:
            vectors, questions = saved[f"t{n}"], saved[f"q{n}"]
        else:
            vectors = np.array(await embedder.embed(texts), dtype=np.float32)
            questions = np.array(await embedder.embed([q["question"] for q in asked]))
        arrays |= {f"t{n}": vectors, f"q{n}": questions}
        for doc in docs:
            for term in doc:
                df[term] += 1
        stored += len(docs)  # IDF over the collection as it stands when this one is asked
        idf = {t: math.log(1 + (stored - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        out.append(Conversation(texts, dia, payloads, vectors, docs, asked, questions, idf))
    if cache and saved is None:
        np.savez(cache, **arrays)
    return out


#: A variant: (conversation, question, its vector, now, k) -> a top-k search's record
#: indices, best first (a hybrid search's candidates grow with k, as in the store).
Variant = Callable[[Conversation, str, np.ndarray, float, int], list[int]]


def lists(
    c: Conversation, question: str, vector: np.ndarray, now: float, depth: int, boost: bool
) -> tuple[list[list[Point]], list[ties.Side]]:
    """Each side's candidates as the store fetches them (and again under the boost)."""
    dense, terms = c.vectors @ vector, c.bm25(question)
    masks = [np.ones(len(c.texts), bool)]
    if boost and (boosted := c.boost(question, now)) is not None:
        masks.append(boosted)
    found: list[list[Point]] = []
    kinds: list[ties.Side] = []
    for mask in masks:
        for kind, scores in (("dense", dense), ("lexical", terms)):
            keep = mask & (scores > 0) if kind == "lexical" else mask
            points = [
                Point(f"{i:06d}", float(scores[i]), c.payloads[i]) for i in np.flatnonzero(keep)
            ]
            found.append(ties.settle(points, ties.fetch(depth), kind))
            kinds.append(kind)  # type: ignore[arg-type]
    return found, kinds


def store(retrieval: Retrieval, boost: bool = True, every: bool = False) -> Variant:
    """The store's ranking with ``retrieval`` (``every``: all its candidates, not k)."""

    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        found, kinds = lists(c, question, vector, now, retrieval.candidates(k), boost)
        return [int(p.id) for p in ties.fuse(found, kinds, retrieval, 10**6 if every else k)]

    return rank


def fused_scores(
    c: Conversation, question: str, vector: np.ndarray, now: float, k: int
) -> dict[int, float]:
    """The default ranking of every candidate, its order as scores (rank r scores
    1 / (5 + r)), for the variants that rework it."""
    ranked = store(Retrieval(**BEFORE), every=True)(c, question, vector, now, k)
    return {i: 1 / (5 + r) for r, i in enumerate(ranked, 1)}


def best(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda i: (-round(scores[i], 6), i))


def session_lift(gamma: float, hits: int = 10) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        scores = fused_scores(c, question, vector, now, k)
        per = defaultdict(float)
        for i in best(scores)[:hits]:
            per[c.payloads[i]["thread"]] += scores[i]
        return best({i: s + gamma * per[c.payloads[i]["thread"]] for i, s in scores.items()})

    return rank


def name_boost(weight: float) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        scores = fused_scores(c, question, vector, now, k)
        named = set(NAME.findall(question))
        terms = c.bm25(question)
        speaker = [
            i for i in np.argsort(-terms, kind="stable") if c.texts[i].split(" ", 1)[0] in named
        ]
        for r, i in enumerate(speaker[:40], 1):
            scores[int(i)] = scores.get(int(i), 0.0) + weight / (5 + r)
        return best(scores)

    return rank


def lexical_feedback(weight: float, top: int = 3, extra: int = 10) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        scores = fused_scores(c, question, vector, now, k)
        asked = set(lexical.query(question)[0])
        gain: dict[int, float] = defaultdict(float)
        for i in best(scores)[:top]:
            for term, w in c.docs[i].items():
                if term not in asked:
                    gain[term] += w * c.idf.get(term, 0.0)
        terms = asked | set(sorted(gain, key=lambda t: (-gain[t], t))[:extra])
        again = np.array([sum(d.get(t, 0.0) * c.idf.get(t, 0.0) for t in terms) for d in c.docs])
        for r, i in enumerate(np.argsort(-again, kind="stable")[:40], 1):
            scores[int(i)] = scores.get(int(i), 0.0) + weight / (5 + r)
        return best(scores)

    return rank


def dense_feedback(weight: float, top: int = 3) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        scores = fused_scores(c, question, vector, now, k)
        moved = vector + 0.5 * c.vectors[best(scores)[:top]].mean(axis=0)
        again = c.vectors @ (moved / np.linalg.norm(moved))
        for r, i in enumerate(np.argsort(-again, kind="stable")[:40], 1):
            scores[int(i)] = scores.get(int(i), 0.0) + weight / (5 + r)
        return best(scores)

    return rank


def entity_hop(weight: float, top: int = 3) -> Variant:
    """A second lexical search: the question with the names the top hits mention (capitalised
    words past a sentence's start, not a speaker's, not asked already)."""

    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        scores = fused_scores(c, question, vector, now, k)
        speakers = {t.split(" ", 1)[0] for t in c.texts}
        asked = set(re.findall(r"\w+", question.lower()))
        names = set()
        for i in best(scores)[:top]:
            said = c.texts[i].split("): ", 1)[-1]
            names |= {w for w in CAPITAL.findall(said) if w not in speakers}
        names = {w for w in names if w.lower() not in asked}
        if not names:
            return best(scores)
        again = c.bm25(question + " " + " ".join(sorted(names)))
        for r, i in enumerate(np.argsort(-again, kind="stable")[:40], 1):
            scores[int(i)] = scores.get(int(i), 0.0) + weight / (5 + r)
        return best(scores)

    return rank


VARIANTS: dict[str, Variant] = {
    "hybrid+time": store(Retrieval(**BEFORE, neighbour_lift=0.0)),
    "+nb (before)": store(Retrieval(**BEFORE)),
    "+nb +priors (default)": store(Retrieval()),
    "+nb 0.1": store(Retrieval(**BEFORE, neighbour_lift=0.1)),
    "+nb 0.5": store(Retrieval(**BEFORE, neighbour_lift=0.5)),
    "lexical+time": store(Retrieval(**BEFORE, weights=(0.0, 1.0), neighbour_lift=0.0)),
    "hybrid (no time)": store(Retrieval(**BEFORE, neighbour_lift=0.0), boost=False),
    "rrf k=2": store(Retrieval(**BEFORE, rrf_k=2, neighbour_lift=0.0)),
    "rrf k=20": store(Retrieval(**BEFORE, rrf_k=20, neighbour_lift=0.0)),
    "weights .75/1": store(Retrieval(**BEFORE, weights=(0.75, 1.0), neighbour_lift=0.0)),
    "weights 1/.75": store(Retrieval(**BEFORE, weights=(1.0, 0.75), neighbour_lift=0.0)),
    "dbsf+time": store(Retrieval(**BEFORE, fusion="dbsf", neighbour_lift=0.0)),
    "+nb +session .05": session_lift(0.05),
    "+nb +session .1": session_lift(0.1),
    "+nb +name .5": name_boost(0.5),
    "+nb +lexical feedback": lexical_feedback(1.0),
    "+nb +dense feedback": dense_feedback(0.5),
    "+nb +entity hop": entity_hop(0.5),
}


def main(variants: dict[str, Variant] = VARIANTS, doc: str | None = None) -> None:
    parser = argparse.ArgumentParser(description=(doc or __doc__).splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, help="vectors saved here (.npz) and reused")
    parser.add_argument("--variants", help="comma-separated (default: all)")
    parser.add_argument(
        "--categories", action="store_true", help="also @10 per category and split, at the end"
    )
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to evaluate")
        return
    saved = np.load(args.cache) if args.cache and args.cache.is_file() else None
    conversations = asyncio.run(load(json.loads(args.data.read_text()), saved, args.cache))
    chosen = args.variants.split(",") if args.variants else list(variants)
    now, first, every = time.time(), None, {}
    ats = "@" + "/".join(map(str, KS))
    heads = [f"{split} {cat} {ats}" for split in ("tune", "report") for cat in ("all", "multi")]
    print(
        f"{'variant':<{WIDTH}}"
        + "".join(f"{h:>22}" for h in heads)
        + "  @10 +won/-lost (tune report)"
    )
    for name in chosen:
        hits = []  # (split, category, hit at each k)
        for n, c in enumerate(conversations):
            for qa, vector in zip(c.questions, c.question_vectors, strict=True):
                rank = variants[name]
                ten = [c.dia[i] for i in rank(c, qa["question"], vector, now, 10)]
                twenty = [c.dia[i] for i in rank(c, qa["question"], vector, now, 20)]
                # @5 and @10 from a top-10 search (as locomo_recall's), @20 from a top-20 one
                at = tuple(
                    all(e in (ten if k <= 10 else twenty)[:k] for e in qa["evidence"]) for k in KS
                )
                hits.append(("tune" if n < TUNE else "report", CATEGORIES[qa["category"]], at))
        cells = []
        for split in ("tune", "report"):
            for cat in ("all", "multi-hop"):
                rows = [h[2] for h in hits if h[0] == split and cat in ("all", h[1])]
                cells.append(
                    "/".join(f"{sum(r[j] for r in rows) / len(rows):.3f}" for j in range(len(KS)))
                )
        first, every[name] = first or hits, hits
        swing = []
        for split in ("tune", "report"):
            pairs = [(a[2][1], b[2][1]) for a, b in zip(first, hits, strict=True) if a[0] == split]
            swing.append(
                f"+{sum(b and not a for a, b in pairs)}/-{sum(a and not b for a, b in pairs)}"
            )
        print(
            f"{name:<{WIDTH}}" + "".join(f"{cell:>22}" for cell in cells) + f"  {' '.join(swing)}",
            flush=True,
        )
    if args.categories:
        by_category(every)


def by_category(every: dict[str, list[tuple[str, str, tuple[bool, ...]]]]) -> None:
    """Recall@10 of each variant per split and category (questions in brackets)."""
    cells = [
        (split, cat)
        for split in ("tune", "report")
        for cat in CATEGORIES.values()
        if cat != "adversarial"
    ]
    any_hits = next(iter(every.values()), [])
    count = {cell: sum(h[:2] == cell for h in any_hits) for cell in cells}
    heads = [f"{s[0]} {c[:6]} ({count[s, c]})" for s, c in cells]
    print(f"\n@10 per category\n{'variant':<{WIDTH}}" + "".join(f"{h:>16}" for h in heads))
    for name, hits in every.items():
        rates = []
        for cell in cells:
            rows = [h[2][KS.index(10)] for h in hits if h[:2] == cell]
            rates.append(f"{sum(rows) / max(1, len(rows)):.3f}")
        print(f"{name:<{WIDTH}}" + "".join(f"{r:>16}" for r in rates))


if __name__ == "__main__":
    main()
