"""Delta operations (seed 003: ADD / UPDATE / TAG / REMOVE): checks and application.

:func:`check` runs every validation before anything is computed or written, so a bad
delta changes nothing. :func:`apply` then changes a working copy of the playbook:

- ADD: content whose normalised form equals a bullet's, or whose embedding is at least
  ``reinforce_threshold`` similar to one of the same memory type (seed 000's
  reinforce-over-clone, 0.9) that :mod:`memory_services.dedup_guard` calls the same
  lesson, reinforces that bullet (change
  ``reinforced``, ``into`` it; its wording joins the bullet's ``aliases``); otherwise a new
  bullet (``added``).
- UPDATE / TAG / REMOVE name a ``bullet_id``; one that is not (or no longer) in the
  playbook is skipped with a warning, so a lesson about a bullet that was pruned or merged
  meanwhile does not fail the rest of the delta.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import numpy as np

from memory_services.dedup_guard import may_merge
from memory_services.playbook import bullets as ops_on
from memory_services.playbook.playbook import Playbook, Vector
from memory_services.playbook.records import PlaybookPolicy, bullet_id, content_hash, normalise
from memory_services.playbook.scoring import infer_memory_type
from react_mem.errors import BadRequest
from react_mem.schema.errors import ErrorType
from react_mem.schema.playbook import Bullet, BulletChange, ChangeKind, Delta, DeltaOperation

logger = logging.getLogger(__name__)

MAX_ID_CHARS = 256
MAX_LABEL_CHARS = 200
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_NOTE_CHARS = 2000


def _bad(message: str, type: ErrorType = "bad-delta") -> BadRequest:
    return BadRequest(message, type=type)


def check(delta: Delta | None, policy: PlaybookPolicy) -> Delta:
    """``delta`` if every part of it is valid, else a :class:`BadRequest`."""
    if delta is None:
        raise _bad("apply-delta needs a 'delta'")
    if not delta.delta_id.strip():
        raise _bad("delta.delta_id is empty: it makes the delta apply exactly once")
    if len(delta.delta_id) > MAX_ID_CHARS:
        raise _bad(f"delta.delta_id is longer than {MAX_ID_CHARS} characters")
    if len(delta.topic or "") > MAX_LABEL_CHARS:
        raise _bad(f"delta.topic is limited to {MAX_LABEL_CHARS} characters")
    if len(delta.source) > MAX_NOTE_CHARS or len(delta.reason) > MAX_NOTE_CHARS:
        raise _bad(f"delta.source and delta.reason are limited to {MAX_NOTE_CHARS} characters")
    if not delta.operations:
        raise _bad("delta.operations is empty")
    if len(delta.operations) > policy.max_operations:
        raise _bad(f"delta has {len(delta.operations)} operations; at most {policy.max_operations}")
    for n, op in enumerate(delta.operations):
        _check_operation(op, f"delta.operations[{n}]", policy)
    return delta


def _check_operation(op: DeltaOperation, where: str, policy: PlaybookPolicy) -> None:
    if op.type == "ADD" or op.content is not None:
        _check_content(op.content, f"{where}.content", policy)
    if op.type != "ADD":
        if not op.bullet_id:
            raise _bad(f"{where}: {op.type} needs 'bullet_id'")
        try:
            uuid.UUID(op.bullet_id)
        except ValueError:
            raise _bad(f"{where}.bullet_id {op.bullet_id!r} is not a bullet id", "bad-id") from None
    counts = op.helpful + op.harmful + op.neutral
    if op.type == "TAG" and counts == 0:
        raise _bad(f"{where}: TAG needs a helpful, harmful or neutral increment")
    if op.type == "UPDATE" and counts == 0 and not _changes_fields(op):
        raise _bad(f"{where}: UPDATE changes nothing")
    labels = [op.section or "", op.topic or "", op.concept or "", op.user or ""]
    if any(len(label) > MAX_LABEL_CHARS for label in labels):
        raise _bad(f"{where}: section, topic, concept and user are limited to {MAX_LABEL_CHARS}")
    if len(op.tags) > MAX_TAGS or any(len(t) > MAX_TAG_CHARS for t in op.tags):
        raise _bad(f"{where}.tags: at most {MAX_TAGS} tags of {MAX_TAG_CHARS} characters")
    size = sum(len(k) + len(v) for k, v in op.metadata.items())
    if size > policy.max_content_chars:
        raise _bad(f"{where}.metadata has {size} characters; at most {policy.max_content_chars}")


def _changes_fields(op: DeltaOperation) -> bool:
    named = (op.content, op.section, op.memory_type, op.topic, op.concept, op.user, op.ttl_days)
    return any(v is not None for v in named) or bool(op.tags or op.metadata)


def _check_content(content: str | None, where: str, policy: PlaybookPolicy) -> None:
    if content is None or not normalise(content):
        raise _bad(f"{where} is empty", "bad-content")
    if len(content) > policy.max_content_chars:
        raise _bad(
            f"{where} has {len(content)} characters; the limit is {policy.max_content_chars}",
            "bad-content",
        )


def contents(delta: Delta) -> list[str]:
    """The texts a delta needs embedded (ADD and UPDATE content), once each."""
    return list(dict.fromkeys(op.content.strip() for op in delta.operations if op.content))


class Nearest:
    """Cosine search over the working playbook while a delta changes it."""

    def __init__(self, vectors: dict[str, Vector], dim: int) -> None:
        self._ids = list(vectors)
        self._base = (
            np.stack([vectors[i] for i in self._ids])
            if self._ids
            else np.zeros((0, dim), dtype=np.float32)
        )
        self._alive = np.ones(len(self._ids), dtype=bool)
        self._row = {id: n for n, id in enumerate(self._ids)}
        self._extra: dict[str, Vector] = {}

    def drop(self, id: str) -> None:
        if id in self._row:
            self._alive[self._row[id]] = False
        self._extra.pop(id, None)

    def put(self, id: str, vector: Vector) -> None:
        self.drop(id)
        self._extra[id] = vector

    def ranked(self, vector: Vector, threshold: float) -> list[tuple[str, float]]:
        """Live bullets at least ``threshold`` similar to ``vector``, most similar first."""
        found: list[tuple[float, str]] = []
        if self._alive.any():
            sims = self._base @ vector
            hits = np.flatnonzero(self._alive & (sims >= threshold))
            found += [(float(sims[n]), self._ids[n]) for n in hits]
        for id, extra in self._extra.items():
            if (sim := float(extra @ vector)) >= threshold:
                found.append((sim, id))
        return [(id, sim) for sim, id in sorted(found, reverse=True)]


@dataclass
class Work:
    """A delta in progress: the working copy, the changes so far, the dedup candidates."""

    pb: Playbook
    now: float
    policy: PlaybookPolicy
    changes: list[BulletChange] = field(default_factory=list)
    #: Bullets added or reworded by this delta: grow-and-refine compares them to the rest.
    fresh: set[str] = field(default_factory=set)

    def note(self, change: ChangeKind, id: str, into: str | None = None) -> None:
        self.changes.append(BulletChange(bullet_id=id, change=change, into=into))

    def remove(self, id: str) -> Bullet:
        self.pb.vectors.pop(id, None)
        self.fresh.discard(id)
        return self.pb.bullets.pop(id)


def apply(work: Work, delta: Delta, vectors: dict[str, Vector], user: str | None) -> None:
    """Apply the operations of a checked ``delta`` in order; ``vectors`` holds the
    embedding of every text :func:`contents` returned."""
    pb, clock, now = work.pb, work.pb.clock, work.now
    nearest = Nearest(pb.vectors, pb.dim)
    by_hash = {b.content_hash: b.id for b in pb.bullets.values()}
    for op in delta.operations:
        if op.type == "ADD":
            assert op.content is not None  # checked
            content = op.content.strip()
            vector = vectors[content]
            digest = content_hash(normalise(content))
            match = by_hash.get(digest)
            if match is None:
                kind = op.memory_type or infer_memory_type(content)
                near = nearest.ranked(vector, work.policy.reinforce_threshold)
                same = (
                    i
                    for i, _ in near
                    if pb.bullets[i].memory_type == kind
                    and may_merge(content, pb.bullets[i].content)
                )
                match = next(same, None)
            new_id = bullet_id(pb.key, normalise(content), pb.bullets)
            if match is not None:
                pb.bullets[match] = ops_on.reinforced(pb.bullets[match], op, clock=clock, now=now)
                work.note("reinforced", new_id, into=match)
                continue
            bullet = ops_on.created(
                new_id,
                op,
                collection=pb.key.collection,
                context=pb.key.context,
                user=user,
                clock=clock,
                now=now,
                topic=delta.topic,
            )
            pb.bullets[new_id], pb.vectors[new_id] = bullet, vector
            by_hash[digest] = new_id
            nearest.put(new_id, vector)
            work.fresh.add(new_id)
            work.note("added", new_id)
            continue
        assert op.bullet_id is not None  # checked
        id = str(uuid.UUID(op.bullet_id))
        if id not in pb.bullets:
            logger.warning(
                "playbook %s: %s of unknown bullet %s skipped", pb.key.label, op.type, id
            )
            continue
        old = pb.bullets[id]
        if op.type == "REMOVE":
            work.remove(id)
            nearest.drop(id)
            by_hash.pop(old.content_hash, None)
            work.note("removed", id)
        elif op.type == "TAG":
            pb.bullets[id] = ops_on.tagged(old, op, clock=clock, now=now)
            work.note("tagged", id)
        else:
            text = op.content.strip() if op.content is not None else None
            new = ops_on.updated(old, op, content=text, clock=clock, now=now)
            if new.content_hash != old.content_hash:
                assert text is not None
                by_hash.pop(old.content_hash, None)
                by_hash.setdefault(new.content_hash, id)
                pb.vectors[id] = vectors[text]
                nearest.put(id, vectors[text])
                work.fresh.add(id)
            pb.bullets[id] = new
            work.note("updated", id)
