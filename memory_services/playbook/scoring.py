"""The playbook's arithmetic (seeds 000 and 001), pure and unit-tested.

Decay on a per-scope access clock::

    decay = S·(1-r_s)^t_s + E·(1-r_e)^t_e + P·(1-r_p)^t_p,   t_x = max(clock - index_x, 0)

Only the bullet's active memory type has a non-zero strength. Retrieval::

    score = w_rel·relevance + w_str·min(decay/baseline, 1) + w_type·type_priority + bonus

with baseline strength 1.0 (the cap matters only when ``reinforcement_gain`` lets
strengths grow past 1), relevance the cosine similarity of query and bullet embeddings
(negative values count as 0) or the seeds' Jaccard overlap of their words, and bonus =
``user_boost`` when the bullet is the requesting user's + ``topic_boost`` when its topic
is the requested one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from memory_services.playbook.records import BASELINE_STRENGTH
from react_mem.errors import BadRequest
from react_mem.schema.playbook import Bullet, MemoryType, Weights

Floats = npt.NDArray[np.float64]

TYPES: Final[tuple[MemoryType, ...]] = ("semantic", "episodic", "procedural")
#: Seed 001: procedural > episodic > semantic.
TYPE_PRIORITY: Final[dict[MemoryType, float]] = {
    "procedural": 1.0,
    "episodic": 0.7,
    "semantic": 0.4,
}
#: Seed 001's original weights, and its CL-bench "relevance-dominant" enhancement.
PRESETS: Final[dict[str, Weights]] = {
    "default": Weights(relevance=0.25, strength=0.55, type=0.20),
    "relevance-dominant": Weights(relevance=0.55, strength=0.25, type=0.20),
}


@dataclass(frozen=True, slots=True)
class DecayRates:
    """Per-access decay of each memory type, clamped to [0, 1] (seed 000)."""

    semantic: float = 0.01
    episodic: float = 0.05
    procedural: float = 0.002

    def __post_init__(self) -> None:
        for name in TYPES:
            object.__setattr__(self, name, min(1.0, max(0.0, float(getattr(self, name)))))

    def retention(self) -> Floats:
        """``1 - r`` per type, in :data:`TYPES` order."""
        return 1.0 - np.array([self.semantic, self.episodic, self.procedural])


def strengths(bullet: Bullet) -> tuple[float, float, float]:
    return (bullet.semantic_strength, bullet.episodic_strength, bullet.procedural_strength)


def access_indexes(bullet: Bullet) -> tuple[int, int, int]:
    return (
        bullet.semantic_access_index,
        bullet.episodic_access_index,
        bullet.procedural_access_index,
    )


def decay_score(bullet: Bullet, clock: int, rates: DecayRates) -> float:
    """The bullet's decayed strength at ``clock`` (one bullet; the formula above)."""
    total = 0.0
    for strength, index, keep in zip(
        strengths(bullet), access_indexes(bullet), rates.retention(), strict=True
    ):
        if strength > 0:
            total += strength * float(keep) ** max(clock - index, 0)
    return total


def decay_scores(
    strength: Floats, index: npt.NDArray[np.int64], clock: int, rates: DecayRates
) -> Floats:
    """:func:`decay_score` for many bullets: ``strength`` and ``index`` are (n, 3)."""
    elapsed = np.maximum(clock - index, 0)
    return np.asarray((strength * rates.retention() ** elapsed).sum(axis=1), dtype=np.float64)


#: Seed 002's confidence: its boost per piece of evidence, and the boost's cap.
EVIDENCE_BOOST, MAX_BOOST = 0.01, 0.2


def evidence_confidence(helpful: int, harmful: int) -> float:
    """Seed 002's ``min(1, success rate + min(0.2, 0.01 * evidence))``, the marks as the
    evidence (0.5 when there is none, seed 000's untouched score)."""
    marks = helpful + harmful
    base = helpful / marks if marks else 0.5
    return round(min(1.0, base + min(MAX_BOOST, EVIDENCE_BOOST * marks)), 6)


def recency(bullet: Bullet, clock: int, rates: DecayRates) -> float:
    """Seed 002's recency factor: the active memory type's retention since last used."""
    keep = 1.0 - float(getattr(rates, bullet.memory_type))  # retention()'s, not its array
    index: int = getattr(bullet, f"{bullet.memory_type}_access_index")
    return float(keep ** max(clock - index, 0))


def keep_value(bullet: Bullet, clock: int, rates: DecayRates) -> float:
    """What pruning ranks by: the decay score with each net helpful mark stretching the
    bullet's memory, ``S·(1-r)^(t / (1 + n))``, n = max(helpful - harmful, 0) (a spacing
    effect: a strategy that helped ten times is forgotten ten times slower than a fresh
    one). The seeds' decay alone makes pruning pruning by recency, which loses proven
    strategies between two uses (docs/ace.md)."""
    stretch = 1 + max(bullet.helpful - bullet.harmful, 0)
    total = 0.0
    for strength, index, keep in zip(
        strengths(bullet), access_indexes(bullet), rates.retention(), strict=True
    ):
        if strength > 0:
            total += strength * float(keep) ** (max(clock - index, 0) / stretch)
    return total


def normalised_strength(decay: float) -> float:
    return min(decay / BASELINE_STRENGTH, 1.0)


def resolve_weights(weights: str | Weights) -> Weights:
    if isinstance(weights, Weights):
        return weights
    try:
        return PRESETS[weights]
    except KeyError:
        raise BadRequest(
            f"unknown weights preset {weights!r}; use one of {', '.join(PRESETS)} "
            "or explicit weights",
            type="bad-weights",
        ) from None


def combined(
    weights: Weights, relevance: float, decay: float, memory_type: MemoryType, bonus: float
) -> float:
    """The retrieval score of one bullet (the formula above)."""
    return (
        weights.relevance * relevance
        + weights.strength * normalised_strength(decay)
        + weights.type * TYPE_PRIORITY[memory_type]
        + bonus
    )


_WORD = re.compile(r"\w+")


def words(text: str) -> frozenset[str]:
    """Lower-cased word set (the seeds' Jaccard tokens)."""
    return frozenset(_WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


# Seed 000's curator infers the type from keywords. Episodic markers are checked first
# (they name a past occurrence), then procedural ones (ordering and imperatives); anything
# else is semantic (general knowledge).
_EPISODIC = re.compile(
    r"\b(last time|previously|yesterday|earlier today|in the past|happened|"
    r"the previous (run|attempt|session|time))\b",
    re.IGNORECASE,
)
_PROCEDURAL = re.compile(
    r"\b(first|then|steps?|before|always|never|make sure|ensure|check|verify|follow)\b",
    re.IGNORECASE,
)


def infer_memory_type(content: str) -> MemoryType:
    """``episodic`` for past occurrences ("last time", "… happened"), ``procedural`` for
    ordered or imperative strategies ("first", "then", "step", "before", "always", "check"),
    otherwise ``semantic``."""
    if _EPISODIC.search(content):
        return "episodic"
    if _PROCEDURAL.search(content):
        return "procedural"
    return "semantic"
