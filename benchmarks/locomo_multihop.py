"""Multi-hop candidates on LoCoMo: ways to bring more of a question's evidence into the top k.

``locomo_variants.py`` reorders what the default search finds; about half of the multi-hop
questions have an evidence turn beyond its 50th hit, so these variants change what is found,
side by side with the default on the tuning and the report split (same in-process rebuild of
the store's ranking, same table). Each is measured against ``+nb (before)``, the default
before the priors on a fact's text (``+priors (the service's)``: the store's own, now the
default):

- ``hop tail N`` / ``hop rr``: a second search seeded by the first one's top three hits (the
  question's vector moved towards theirs, the question's terms with their rarest ten), its
  hits filling the last N places of the top k, or alternating with the first search's;
- ``session lift`` / ``session draw N``: each session scored as one document (its turns' BM25
  terms together, its turns' mean vector, fused by RRF); the turns of the top five sessions
  lifted by their session's rank, or the last N places filled with the best turn of each top
  session not yet represented;
- ``split names``: a question naming both speakers (or "both", "in common") asked once per
  person, with the other name left out; the sub-searches' hits alternate;
- ``next-turn context``: each turn's lexical terms also hold the turn after it (today: the
  turn before);
- ``sentence max``: a turn's dense score is the best of its own and its sentences' (each
  sentence embedded with the turn's speaker and date);
- ``no questions`` / ``length prior`` / ``priors``: priors on the default's rank scores
  (``1 / (5 + rank)``): a turn that only asks (ends with "?") scaled by 0.7; a turn by
  1 + 0.2 log(words / 16), its words without speaker and date (``GRID``: other constants).

Vectors of turns, questions, sentences and sub-questions are cached in ``--cache`` (an .npz
next to which ``-extra.npz`` holds the last three). The data is read from
``../shared/eval/locomo-dev.json`` and never copied.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from locomo_variants import (
    BEFORE,
    NAME,
    Conversation,
    Point,
    Variant,
    best,
    fused_scores,
    lists,
    main,
    store,
)

from memory_services.store import lexical, ties
from memory_services.store.base import Retrieval
from react_mem.embedding.sentence import SentenceTransformerEmbedder

DEFAULT = Retrieval(**BEFORE)  # the default before the priors
SENTENCE = re.compile(r"(?<=[.!?])\s+")
BOTH = re.compile(r"\bboth\b|\bin common\b", re.I)
#: Set by ``prepare``: per conversation, its extra vectors and indexes.
EXTRA: dict[int, dict[str, Any]] = {}


def speaker(text: str) -> str:
    return text.split(" ", 1)[0]


def said(text: str) -> str:
    return text.split("): ", 1)[-1].strip()


def session(c: Conversation, i: int) -> str:
    return str(c.payloads[i]["thread"])


def extra(c: Conversation) -> dict[str, Any]:
    return EXTRA[id(c)]


def names_in(c: Conversation, question: str) -> list[str]:
    people = {speaker(t) for t in c.texts}
    return sorted({w for w in NAME.findall(question) if w in people})


def sub_questions(c: Conversation, question: str) -> list[str]:
    """The question once per person it names, the others left out (none: not split)."""
    named = names_in(c, question)
    if len(named) < 2 and not (BOTH.search(question) and named):
        return []
    if len(named) < 2:  # "both" with one name: the other speaker is the second person
        named = sorted({speaker(t) for t in c.texts})
    out = []
    for keep in named:
        text = question
        for other in named:
            if other != keep:
                text = re.sub(rf"\s*\b(and|&)\s+{other}\b|\b{other}\s+(and|&)\s*", " ", text)
                text = re.sub(rf"\b{other}\b", "", text)
        out.append(" ".join(text.split()))
    return out


class Lexicon:
    """BM25 over given documents (term weights), IDF from a given table."""

    def __init__(self, docs: list[dict[int, float]], idf: dict[int, float]) -> None:
        self.docs, self.idf = docs, idf
        self.postings: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for n, doc in enumerate(docs):
            for term, weight in doc.items():
                self.postings[term].append((n, weight))

    def scores(self, terms: set[int]) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for term in terms:
            for n, weight in self.postings.get(term, ()):
                out[n] += weight * self.idf.get(term, 0.0)
        return out


def idf_table(df: dict[int, int], count: int) -> dict[int, float]:
    return {t: math.log(1 + (count - n + 0.5) / (n + 0.5)) for t, n in df.items()}


async def prepare(conversations: list[Conversation], cache: Path | None) -> None:
    """Sentence vectors, sub-question vectors, next-turn and session indexes."""
    path = cache.with_name(cache.stem + "-extra.npz") if cache else None
    saved = dict(np.load(path)) if path and path.is_file() else {}
    embedder = None
    if not saved:
        embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", backend="onnx-int8")
        await embedder.start()
    df_next: dict[int, int] = defaultdict(int)
    df_session: dict[int, int] = defaultdict(int)
    stored = sessions_seen = 0
    for n, c in enumerate(conversations):
        sentences, owners = [], []
        for i, text in enumerate(c.texts):
            head = text.split("): ", 1)[0] + "): "
            for part in [p for p in SENTENCE.split(said(text)) if p.strip()] or [said(text)]:
                sentences.append(head + part)
                owners.append(i)
        subs = sorted({s for qa in c.questions for s in sub_questions(c, qa["question"])})
        if embedder is not None:
            saved[f"s{n}"] = np.array(await embedder.embed(sentences), dtype=np.float32)
            saved[f"u{n}"] = np.array(await embedder.embed(subs or ["-"]), dtype=np.float32)
        # lexical: each turn with the turn before (as stored) and the one after
        docs = []
        for i, text in enumerate(c.texts):
            after = (
                said(c.texts[i + 1])
                if i + 1 < len(c.texts) and session(c, i + 1) == session(c, i)
                else ""
            )
            before = said(c.texts[i - 1]) if i and session(c, i - 1) == session(c, i) else ""
            terms = lexical.document("\n".join(x for x in (text, before, after) if x))
            docs.append(dict(zip(*terms, strict=True)))
        for doc in docs:
            for term in doc:
                df_next[term] += 1
        stored += len(docs)
        # sessions: all their turns' words as one document (BM25 over sessions)
        threads = list(dict.fromkeys(session(c, i) for i in range(len(c.texts))))
        member = np.array([threads.index(session(c, i)) for i in range(len(c.texts))])
        session_docs = []
        for t in range(len(threads)):
            words = " ".join(said(c.texts[i]) for i in np.flatnonzero(member == t))
            indices, _ = lexical.document(words)
            counts: dict[int, float] = defaultdict(float)
            for term in indices:
                counts[term] += 1.0
            session_docs.append(counts)  # weight 1 per term (normalised below)
        for doc in session_docs:
            for term in doc:
                df_session[term] += 1
        sessions_seen += len(session_docs)
        means = np.stack([c.vectors[member == t].mean(axis=0) for t in range(len(threads))])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        EXTRA[id(c)] = {
            "sentences": saved[f"s{n}"],
            "owners": np.array(owners),
            "subs": dict(zip(subs, saved[f"u{n}"], strict=False)),
            "next": Lexicon(docs, idf_table(df_next, stored)),
            "lexicon": Lexicon(c.docs, c.idf),
            "member": member,
            "sessions": Lexicon(session_docs, idf_table(df_session, sessions_seen)),
            "session_vectors": means,
            "asks": np.array([said(t).endswith("?") for t in c.texts]),
            "words": np.array([max(1, len(said(t).split())) for t in c.texts]),
        }
    if embedder is not None and path:
        np.savez(path, **saved)


def fuse_lists(
    c: Conversation, found: list[list[Point]], kinds: list[ties.Side], k: int
) -> list[int]:
    return [int(p.id) for p in ties.fuse(found, kinds, DEFAULT, k)]


def side(c: Conversation, scores: np.ndarray, kind: ties.Side, depth: int) -> list[Point]:
    keep = scores > 0 if kind == "lexical" else np.ones(len(scores), bool)
    points = [Point(f"{i:06d}", float(scores[i]), c.payloads[i]) for i in np.flatnonzero(keep)]
    return ties.settle(points, ties.fetch(depth), kind)


def hop_list(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
    """A second hybrid search from the first one's top three hits."""
    first = store(DEFAULT)(c, question, vector, now, k)[:3]
    moved = vector + 0.5 * c.vectors[first].mean(axis=0)
    dense = c.vectors @ (moved / np.linalg.norm(moved))
    asked = set(lexical.query(question)[0])
    gain: dict[int, float] = defaultdict(float)
    for i in first:
        for term, w in c.docs[i].items():
            if term not in asked:
                gain[term] += w * c.idf.get(term, 0.0)
    terms = asked | set(sorted(gain, key=lambda t: (-gain[t], t))[:10])
    words = extra(c)["lexicon"].scores(terms)
    depth = DEFAULT.candidates(k)
    found = [side(c, dense, "dense", depth), side(c, words, "lexical", depth)]
    return fuse_lists(c, found, ["dense", "lexical"], 10**6)


def tail(first: list[int], second: list[int], k: int, places: int) -> list[int]:
    head = first[: k - places]
    return (head + [i for i in second if i not in head] + first)[:k]


def alternate(lists_: list[list[int]], k: int) -> list[int]:
    out: list[int] = []
    for row in zip(*lists_, strict=False):
        out += [i for i in row if i not in out]
    for rest in lists_:
        out += [i for i in rest if i not in out]
    return out[:k]


def hop(places: int | None) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        first = store(DEFAULT, every=True)(c, question, vector, now, k)
        second = hop_list(c, question, vector, now, k)
        if places is None:
            return alternate([first, second], k)
        return tail(first, second, k, places)

    return rank


def session_rank(c: Conversation, question: str, vector: np.ndarray) -> list[int]:
    x = extra(c)
    words = x["sessions"].scores(set(lexical.query(question)[0]))
    dense = x["session_vectors"] @ vector
    fused: dict[int, float] = defaultdict(float)
    for scores in (dense, words):
        for r, t in enumerate(np.argsort(-scores, kind="stable"), 1):
            fused[int(t)] += 1 / (5 + r)
    return best(fused)


def session_lift(gamma: float, top: int = 5) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        scores = fused_scores(c, question, vector, now, k)
        order = {t: r for r, t in enumerate(session_rank(c, question, vector)[:top], 1)}
        member = extra(c)["member"]
        lifted = {
            i: s + (gamma / (5 + order[member[i]]) if member[i] in order else 0.0)
            for i, s in scores.items()
        }
        return best(lifted)

    return rank


def session_draw(places: int, top: int = 5) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        first = store(DEFAULT, every=True)(c, question, vector, now, k)
        member = extra(c)["member"]
        head = first[: k - places]
        held = {member[i] for i in head}
        drawn = []
        for t in session_rank(c, question, vector)[:top]:
            if t not in held:
                inside = [i for i in first if member[i] == t]
                if inside:
                    drawn.append(inside[0])
        return tail(first, drawn, k, min(places, len(drawn)))

    return rank


def split_names(
    c: Conversation, question: str, vector: np.ndarray, now: float, k: int
) -> list[int]:
    subs = sub_questions(c, question)
    first = store(DEFAULT, every=True)(c, question, vector, now, k)
    if not subs:
        return first[:k]
    parts = [store(DEFAULT)(c, s, extra(c)["subs"][s], now, k) for s in subs]
    return alternate([first, *parts], k)


def rescored(dense: Any = None, words: Any = None, every: bool = False) -> Variant:
    """The store's fusion over other dense or lexical scores (``every``: all candidates)."""

    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        found, kinds = lists(c, question, vector, now, DEFAULT.candidates(k), True)
        x = extra(c)
        x["pool"] = sorted({int(p.id) for one in found for p in one})
        d = dense(c, x, vector) if dense else None
        w = words(c, x, question) if words else None
        depth = DEFAULT.candidates(k)
        mask = c.boost(question, now)
        for n, kind in enumerate(kinds):
            scores = d if kind == "dense" else w
            if scores is None:
                continue
            if n >= 2 and mask is not None:
                scores = np.where(mask, scores, -1.0 if kind == "dense" else 0.0)
            found[n] = side(c, scores, kind, depth)
        return fuse_lists(c, found, kinds, 10**6 if every else k)

    return rank


def sentence_max(c: Conversation, x: dict[str, Any], vector: np.ndarray) -> np.ndarray:
    best_ = np.full(len(c.texts), -1.0)
    np.maximum.at(best_, x["owners"], x["sentences"] @ vector)
    return np.maximum(best_, c.vectors @ vector)


def pooled(scores: Any) -> Any:
    """``scores`` for the records the store's default search brings as candidates (its
    dense and lexical lists, under the boost too), the record's own cosine for the rest:
    what a rerank of the fetched candidates can change."""

    def only(c: Conversation, x: dict[str, Any], vector: np.ndarray) -> np.ndarray:
        pool = x["pool"]
        out = c.vectors @ vector
        out[pool] = scores(c, x, vector)[pool]
        return out

    return only


def next_turn(c: Conversation, x: dict[str, Any], question: str) -> np.ndarray:
    return x["next"].scores(set(lexical.query(question)[0]))


def prior(
    asks: float = 0.0, length: float = 0.0, base: Variant | None = None, clip: float = 9.0
) -> Variant:
    def rank(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
        x = extra(c)
        if base is None:
            scores = fused_scores(c, question, vector, now, k)
        else:  # the base ranking's order as scores, as ``fused_scores`` does
            ordered = base(c, question, vector, now, k)
            scores = {i: 1 / (5 + r) for r, i in enumerate(ordered, 1)}
        return best(
            {
                i: s
                * (1 - asks * x["asks"][i])
                * min(1 + clip, max(1 - clip, 1 + length * math.log(x["words"][i] / 16)))
                for i, s in scores.items()
            }
        )

    return rank


def dense(c: Conversation, question: str, vector: np.ndarray, now: float, k: int) -> list[int]:
    """Dense alone (the service's ``mode="dense"``: no boost), equal scores by id."""
    scores = np.round(c.vectors @ vector, ties.DECIMALS["dense"])
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))[:k]]


VARIANTS: dict[str, Variant] = {
    "+nb (before)": store(DEFAULT),
    "dense": dense,
    "hop tail 2": hop(2),
    "hop tail 4": hop(4),
    "hop rr": hop(None),
    "session lift .5": session_lift(0.5),
    "session lift 1": session_lift(1.0),
    "session draw 2": session_draw(2),
    "session draw 4": session_draw(4),
    "split names": split_names,
    "next-turn context": rescored(words=next_turn),
    "sentence max": rescored(dense=sentence_max),
    "no questions .3": prior(asks=0.3),
    "length prior .2": prior(length=0.2),
    "sentence max + priors": prior(0.3, 0.2, rescored(dense=sentence_max, every=True)),
    "sentence max (candidates)": rescored(dense=pooled(sentence_max)),
    "priors": prior(0.3, 0.2),
    "+priors (the service's)": store(Retrieval()),
    "sentence max (candidates) + priors": prior(
        0.3, 0.2, rescored(dense=pooled(sentence_max), every=True)
    ),
}
GRID = {
    f"priors {a} {n}{' clip .2' if clip < 1 else ''}": prior(a, n, clip=clip)
    for a in (0.2, 0.3, 0.5)
    for n in (0.1, 0.2, 0.3)
    for clip in (9.0, 0.2)
}


if __name__ == "__main__":
    import locomo_variants

    original = locomo_variants.load

    async def load(data: list[dict[str, Any]], saved: Any, cache: Path | None) -> Any:
        conversations = await original(data, saved, cache)
        await prepare(conversations, cache)
        return conversations

    locomo_variants.load = load  # type: ignore[assignment]
    main(VARIANTS | GRID, __doc__)
