"""Ranking a playbook for a query: every live bullet of the scope is scored (see
:mod:`.scoring`), the best ``top_k`` are returned with their score and its parts.

A floor keeps unrelated bullets out: only bullets whose relevance reaches
``min_relevance`` are ranked (seed 000's retrieval threshold), except those tagged
:data:`ALWAYS` (the meta-strategy seed bullets, which apply to any task). Without it the
strength and type terms alone fill every slot of every prompt with whatever was used
last. Those general bullets take at most ``general_slots`` places when below the floor, so
that they do not crowd out the lessons that are about the task."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from memory_services.playbook.playbook import Playbook, Vector
from memory_services.playbook.records import BASELINE_STRENGTH, PlaybookPolicy
from memory_services.playbook.scoring import (
    DecayRates,
    Floats,
    decay_scores,
    evidence_confidence,
    jaccard,
    recency,
    words,
)
from memory_services.store import lexical
from react_mem.schema.playbook import Bullet, Weights


@dataclass(frozen=True, kw_only=True)
class Query:
    #: Unit query embedding (embedding or hybrid relevance) or None (Jaccard relevance).
    vector: Vector | None = None
    text: str = ""
    #: Relevance is the mean of the cosine and the query terms' coverage (:func:`coverage`).
    hybrid: bool = False
    top_k: int = 10
    weights: Weights
    user: str | None = None
    topic: str | None = None
    #: Bullets less relevant than this are left out (None: the policy's floor).
    min_relevance: float | None = None


def relevance(pb: Playbook, query: Query) -> Floats:
    columns = pb.columns
    if query.vector is not None:
        cosine = np.maximum((columns.matrix @ query.vector).astype(np.float64), 0.0)
        return (cosine + coverage(pb, query.text)) / 2 if query.hybrid else cosine
    probe = words(query.text)
    return np.array([jaccard(probe, w) for w in columns.words(pb.bullets)], dtype=np.float64)


def coverage(pb: Playbook, text: str) -> Floats:
    """The share of the query's terms each bullet holds, each term weighted by its BM25
    IDF over the playbook (a rare word counts more than a common one); 0..1."""
    asked = set(lexical.query(text)[0])
    held = pb.columns.terms(pb.bullets)
    if not asked or not held:
        return np.zeros(len(held), dtype=np.float64)
    n, df = len(held), Counter(t for terms in held for t in terms & asked)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in asked}
    total = sum(idf.values())
    return np.array([sum(idf[t] for t in terms & asked) / total for terms in held])


def bonus(pb: Playbook, query: Query, policy: PlaybookPolicy) -> Floats:
    columns = pb.columns
    extra = np.zeros(len(columns.ids), dtype=np.float64)
    if query.user:
        extra += policy.user_boost * (columns.users == query.user)
    if query.topic:
        extra += policy.topic_boost * (columns.topics == query.topic.casefold())
    elif query.text and policy.topic_boost:
        extra += policy.topic_boost * mentioned(pb, query.text)
    return extra


def mentioned(pb: Playbook, text: str) -> Floats:
    """1 for each bullet whose topic the query names (every term of the topic, stemmed,
    is among the query's), else 0: a request that names no topic still gets the topic
    boost for the bullets of the topic it is about."""
    held = pb.columns.topic_terms(pb.bullets)
    found = np.zeros(len(held), dtype=np.float64)
    topical = pb.columns.topical(pb.bullets)
    if topical:  # the query's terms, and a test per bullet, only for bullets with a topic
        asked = set(lexical.query(text)[0])
        for n in topical:
            found[n] = held[n] <= asked
    return found


#: What :func:`scored` sets on a ranked bullet: its score and the score's parts.
Parts = dict[str, float]


def rank(
    pb: Playbook, query: Query, rates: DecayRates, policy: PlaybookPolicy, now: float
) -> list[Bullet]:
    """The ``top_k`` live bullets by combined score (ties: lower id first), scored at the
    playbook's current clock, with ``score``, ``relevance``, ``strength`` (normalised),
    ``decay_score`` and ``confidence`` set."""
    return [
        bullet.model_copy(update=parts) for bullet, parts in scored(pb, query, rates, policy, now)
    ]


def scored(
    pb: Playbook, query: Query, rates: DecayRates, policy: PlaybookPolicy, now: float
) -> list[tuple[Bullet, Parts]]:
    """:func:`rank`'s bullets as the playbook holds them, each with the fields its ranked
    copy sets: a retrieval over several playbooks copies only the ``top_k`` it returns."""
    columns = pb.columns
    if not columns.ids:
        return []
    w = query.weights
    rel = relevance(pb, query)
    decay = decay_scores(columns.strength, columns.index, pb.clock, rates)
    strength = np.minimum(decay / BASELINE_STRENGTH, 1.0)  # > 1 only with reinforcement
    score = w.relevance * rel + w.strength * strength + w.type * columns.priority
    score = score + bonus(pb, query, policy)
    floor = query.min_relevance
    if floor is None:
        floor = policy.relevance_floor("embedding" if query.vector is not None else "jaccard")
    related = rel >= floor
    general = columns.always & ~related
    live = np.flatnonzero((columns.expires > now) & (related | columns.always))
    if live.size == 0:
        return []
    # The general bullets below the floor may take at most ``general_slots`` places, so
    # room for k others is found among the best k + (general bullets) candidates.
    k = min(query.top_k + int(general[live].sum()), live.size)
    # Everything scoring at least the k-th best, so that ties are broken by id exactly.
    kth = np.partition(-score[live], k - 1)[k - 1]
    best = live[-score[live] <= kth]
    order, room = [], policy.general_slots
    for n in sorted(best.tolist(), key=lambda n: (-score[n], columns.ids[n])):
        if general[n]:
            if room <= 0:
                continue
            room -= 1
        order.append(n)
        if len(order) == query.top_k:
            break
    found = []
    for n in order:
        bullet = pb.bullets[columns.ids[n]]
        confidence = bullet.confidence or evidence_confidence(bullet.helpful, bullet.harmful)
        parts = {
            "score": float(score[n]),
            "relevance": float(rel[n]),
            "strength": float(strength[n]),
            "decay_score": float(decay[n]),
            "confidence": round(confidence * recency(bullet, pb.clock, rates), 6),
        }
        found.append((bullet, parts))
    return found
