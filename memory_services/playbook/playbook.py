"""One scope's playbook in memory: bullets, their vectors, the access clock and version.

The service keeps recently used playbooks cached (validated against the scope's state
record on every request, so a write by another replica is noticed) and scores retrievals
from column arrays built once per change, so a retrieval over 10k bullets is a few numpy
operations rather than a scan of the store.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from memory_services.playbook.records import INITIAL_STRENGTH, ScopeKey, expires_at
from memory_services.playbook.scoring import TYPE_PRIORITY, TYPES, access_indexes, strengths, words
from memory_services.store import lexical
from react_mem.schema.playbook import Bullet, MemoryType

Vector = npt.NDArray[np.float32]
#: The tag of bullets that apply to any task (the meta-strategy seeds): retrieval's
#: relevance floor does not apply to them.
ALWAYS = "always"


def as_vector(values: Iterable[float]) -> Vector:
    return np.asarray(list(values), dtype=np.float32)


def active_fields(memory_type: MemoryType, strength: float, clock: int) -> dict[str, Any]:
    """Strength only on ``memory_type`` (seed 001: one active type, the others zero), and
    every access index at ``clock``."""
    fields: dict[str, Any] = {}
    for name in TYPES:
        fields[f"{name}_strength"] = strength if name == memory_type else 0.0
        fields[f"{name}_access_index"] = clock
    return fields | {"memory_type": memory_type}


def active_strength(bullet: Bullet) -> float:
    value: float = getattr(bullet, f"{bullet.memory_type}_strength")
    return value or INITIAL_STRENGTH


def touched(bullet: Bullet, clock: int, **changes: Any) -> Bullet:
    """``bullet`` with its active type's access index at ``clock`` (retrieved or reinforced)."""
    return bullet.model_copy(update={f"{bullet.memory_type}_access_index": clock, **changes})


@dataclass
class Columns:
    """Column arrays of the bullets, in ``ids`` order, for vectorised scoring."""

    ids: list[str]
    row: dict[str, int]
    matrix: npt.NDArray[np.float32]
    strength: npt.NDArray[np.float64]
    index: npt.NDArray[np.int64]
    priority: npt.NDArray[np.float64]
    expires: npt.NDArray[np.float64]
    users: npt.NDArray[np.object_]
    topics: npt.NDArray[np.object_]
    #: Tagged :data:`ALWAYS`: exempt from the relevance floor.
    always: npt.NDArray[np.bool_]
    _words: list[frozenset[str]] | None = None
    _terms: list[frozenset[int]] | None = None
    _topic_terms: list[frozenset[int]] | None = None
    _topical: list[int] | None = None

    @classmethod
    def build(cls, bullets: dict[str, Bullet], vectors: dict[str, Vector], dim: int) -> Columns:
        ids = sorted(bullets)
        rows = [bullets[i] for i in ids]
        matrix = (
            np.stack([vectors[i] for i in ids]) if ids else np.zeros((0, dim), dtype=np.float32)
        )
        return cls(
            ids=ids,
            row={i: n for n, i in enumerate(ids)},
            matrix=matrix,
            strength=np.array([strengths(b) for b in rows], dtype=np.float64).reshape(-1, 3),
            index=np.array([access_indexes(b) for b in rows], dtype=np.int64).reshape(-1, 3),
            priority=np.array([TYPE_PRIORITY[b.memory_type] for b in rows], dtype=np.float64),
            expires=np.array([expires_at(b) for b in rows], dtype=np.float64),
            users=np.array([b.user or "" for b in rows], dtype=object),
            topics=np.array([b.topic.casefold() for b in rows], dtype=object),
            always=np.array([ALWAYS in b.tags for b in rows], dtype=np.bool_),
        )

    def words(self, bullets: dict[str, Bullet]) -> list[frozenset[str]]:
        if self._words is None:
            self._words = [words(bullets[i].content) for i in self.ids]
        return self._words

    def terms(self, bullets: dict[str, Bullet]) -> list[frozenset[int]]:
        """Each bullet's lexical terms (stemmed, hashed: :mod:`memory_services.store.lexical`)."""
        if self._terms is None:
            self._terms = [frozenset(lexical.document(bullets[i].content)[0]) for i in self.ids]
        return self._terms

    def topic_terms(self, bullets: dict[str, Bullet]) -> list[frozenset[int]]:
        """Each bullet's topic as lexical terms (empty: no topic)."""
        if self._topic_terms is None:
            self._topic_terms = [topic_terms(bullets[i].topic) for i in self.ids]
        return self._topic_terms

    def topical(self, bullets: dict[str, Bullet]) -> list[int]:
        """The rows of the bullets that have a topic (one with lexical terms)."""
        if self._topical is None:
            self._topical = [n for n, terms in enumerate(self.topic_terms(bullets)) if terms]
        return self._topical


@functools.lru_cache(maxsize=4096)
def topic_terms(topic: str) -> frozenset[int]:
    """A topic's lexical terms (a playbook holds few topics, asked after every change)."""
    return frozenset(lexical.query(topic)[0]) if topic else frozenset()


@dataclass
class Playbook:
    key: ScopeKey
    dim: int
    bullets: dict[str, Bullet] = field(default_factory=dict)
    vectors: dict[str, Vector] = field(default_factory=dict)
    #: The access clock: advanced by one per retrieval.
    clock: int = 0
    #: The last applied delta's version (0: none yet).
    version: int = 0
    #: Bumped by every write; the state record holds it, so a stale cache is noticed.
    generation: int = 0
    seeded: bool = False
    _columns: Columns | None = field(default=None, repr=False)

    def copy(self) -> Playbook:
        """A working copy for a delta (bullets are immutable; the maps are copied)."""
        return replace(self, bullets=dict(self.bullets), vectors=dict(self.vectors), _columns=None)

    @property
    def columns(self) -> Columns:
        if self._columns is None:
            self._columns = Columns.build(self.bullets, self.vectors, self.dim)
        return self._columns

    def live(self, now: float) -> list[Bullet]:
        return [b for b in self.bullets.values() if expires_at(b) > now]

    def touch(self, ids: Iterable[str], clock: int, now: float) -> None:
        """Refresh retrieved bullets' active access index (in place, columns included)."""
        columns = self._columns
        for id in ids:
            bullet = touched(self.bullets[id], clock, last_used=now)
            self.bullets[id] = bullet
            if columns is not None:
                columns.index[columns.row[id], TYPES.index(bullet.memory_type)] = clock
