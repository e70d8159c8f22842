"""Consolidation settings, shared by the services that consolidate (facts, episodes)."""

from __future__ import annotations

from pydantic import Field

from memory_services.consolidation.engine import IMPORTANCE_THRESHOLD, MIN_IMPORTANCE, Options
from memory_services.runtime import MemorySettings


class ConsolidationSettings(MemorySettings):
    #: Seconds between scheduled consolidation passes over every collection (checked at
    #: each sweep); none: only on request.
    consolidation_interval: float | None = Field(default=None, gt=0)
    #: Cosine similarity at or above which memories merge (facts: below the store's
    #: near-duplicate threshold, to catch paraphrases a store added separately).
    consolidation_similarity: float = Field(default=0.85, gt=0.0, le=1.0)
    #: Memories whose importance (episodes: score) is at or above this are never changed
    #: (seed 002's ``importance_threshold``, 0.8).
    consolidation_importance: float = Field(default=IMPORTANCE_THRESHOLD, gt=0.0, le=1.0)
    #: Only memories below this are merged into another (seed 002's ``min_importance``,
    #: 0.5); one between the two may absorb lesser duplicates of itself and is kept.
    consolidation_min_importance: float | None = Field(default=MIN_IMPORTANCE, gt=0.0, le=1.0)
    #: Memories one pass compares at most (the rest wait for the next pass).
    consolidation_max_candidates: int = Field(default=10_000, ge=2, le=100_000)

    def consolidation_options(self) -> Options:
        """A request's pass options default to these."""
        return Options(
            similarity_threshold=self.consolidation_similarity,
            importance_threshold=self.consolidation_importance,
            min_importance=self.consolidation_min_importance,
            max_candidates=self.consolidation_max_candidates,
        )
