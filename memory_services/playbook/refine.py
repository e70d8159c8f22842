"""Grow-and-refine (seeds 000, 001), run after every delta on its working copy.

1. Deduplication: bullets at or above ``dedup_threshold`` cosine similarity (0.85, seed
   001's threshold, applied to embeddings) that :mod:`memory_services.dedup_guard` calls
   the same lesson, and that are of one memory type, merge into a canonical survivor
   (higher helpful - harmful, then newest; :func:`.bullets.merged`, which keeps the
   other's wording in ``aliases``), most similar pairs first.
   Only pairs with a bullet this delta added or reworded are compared: the playbook held no
   such pair before the delta, so this finds what seed 001's full pairwise pass would.
2. With ``reinforcement_gain`` set, strengths follow the counters (:func:`strengthen`);
   every bullet's evidence-based confidence (seed 002) follows its counters.
3. Seed 003's auto-pruning: bullets marked harmful ``harmful_margin`` times more than
   helpful are removed (:func:`drop_harmful`).
4. Pruning: past ``max_bullets``, the lowest by decay score with evidence stretching it
   (:func:`.scoring.keep_value`; at ``reinforcement_gain`` 0, the seeds' model, by decay
   alone), then confidence, then helpful count (seed 000's
   "default ordering"; then older, then lower id) are removed.

Expired bullets (TTL) are removed first, as ``pruned``.
"""

from __future__ import annotations

import numpy as np

from memory_services.dedup_guard import may_merge
from memory_services.playbook import bullets as ops_on
from memory_services.playbook.deltas import Work
from memory_services.playbook.records import expires_at
from memory_services.playbook.scoring import (
    DecayRates,
    decay_score,
    evidence_confidence,
    keep_value,
)
from react_mem.schema.playbook import Bullet


def expire(work: Work) -> None:
    for bullet in sorted(work.pb.bullets.values(), key=lambda b: b.id):
        if expires_at(bullet) <= work.now:
            work.remove(bullet.id)
            work.note("pruned", bullet.id)


def refine(work: Work, rates: DecayRates) -> None:
    deduplicate(work)
    strengthen(work)
    drop_harmful(work)
    prune(work, rates)


def drop_harmful(work: Work) -> None:
    """Seed 003's auto-pruning: a bullet marked harmful at least ``harmful_margin`` times
    more than helpful is removed, however much room the playbook has (0: never)."""
    margin = work.policy.harmful_margin
    if margin <= 0:
        return
    for bullet in sorted(work.pb.bullets.values(), key=lambda b: b.id):
        if bullet.harmful - bullet.helpful >= margin:
            work.remove(bullet.id)
            work.note("pruned", bullet.id)


def strengthen(work: Work) -> None:
    """Strengths from counters, when ``reinforcement_gain`` is set (see :mod:`.bullets`),
    and each bullet's evidence-based confidence (a bullet whose counters did not change is
    left as it is, so it is not written again)."""
    for id, bullet in work.pb.bullets.items():
        bullet = ops_on.strengthened(bullet, work.policy)
        confidence = evidence_confidence(bullet.helpful, bullet.harmful)
        if bullet.confidence != confidence:
            bullet = bullet.model_copy(update={"confidence": confidence})
        work.pb.bullets[id] = bullet


def deduplicate(work: Work) -> None:
    pb, threshold = work.pb, work.policy.dedup_threshold
    fresh = sorted(work.fresh & pb.bullets.keys())
    if not fresh or len(pb.bullets) < 2:
        return
    ids = sorted(pb.bullets)
    sims = np.stack([pb.vectors[i] for i in fresh]) @ np.stack([pb.vectors[i] for i in ids]).T
    pairs: dict[tuple[str, str], float] = {}
    for a, b in zip(*np.nonzero(sims >= threshold), strict=True):
        x, y = fresh[a], ids[b]
        if x != y and same_lesson(pb.bullets[x], pb.bullets[y]):
            pairs[(min(x, y), max(x, y))] = float(sims[a, b])
    for x, y in sorted(pairs, key=lambda p: (-pairs[p], p)):
        if x not in pb.bullets or y not in pb.bullets:
            continue  # one of them was merged away already
        keep, drop = ops_on.canonical(pb.bullets[x], pb.bullets[y])
        pb.bullets[keep.id] = ops_on.merged(keep, drop, now=work.now)
        work.remove(drop.id)
        work.note("merged", drop.id, into=keep.id)


def same_lesson(a: Bullet, b: Bullet) -> bool:
    """Alike bullets merge only within one memory type (seed 000: duplicates of the same
    memory type merge; a fact and a procedure that read alike are two memories)."""
    return a.memory_type == b.memory_type and may_merge(a.content, b.content)


def prune(work: Work, rates: DecayRates) -> None:
    pb, limit = work.pb, work.policy.max_bullets
    if len(pb.bullets) <= limit:
        return
    # At gain 0, the seeds' model: pruning by decay alone.
    value = decay_score if work.policy.reinforcement_gain <= 0 else keep_value
    ranked = sorted(
        pb.bullets.values(),
        key=lambda b: (
            value(b, pb.clock, rates),
            b.confidence or 0.0,
            b.helpful,
            b.created_at,
            b.id,
        ),
        reverse=True,
    )
    for bullet in ranked[limit:]:
        work.remove(bullet.id)
        work.note("pruned", bullet.id)
