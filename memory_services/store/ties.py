"""One order for equal scores, whatever process asks.

The engines fuse a hybrid search's lists (RRF, DBSF) in a hash map whose order is seeded per
process, so records with equal fused scores (common under RRF: rank 1 on one side scores as
rank 1 on the other) came back in a different order, and a different top k, from one run to
the next. So a fused search asks the engine for every candidate its prefetches can bring and
orders them here: by score, then by id; scores are compared to six decimals, so that sums
added in another order (a last-bit difference in 32-bit floats) are equal too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

#: Decimals of a fused score that count; below them two scores are a tie.
DECIMALS = 6


class Scored(Protocol):
    @property
    def id(self) -> object: ...

    @property
    def score(self) -> float: ...


P = TypeVar("P", bound=Scored)


def fused_limit(depth: int, prefetches: int) -> int:
    """What a fused search asks the engine for: every candidate, so no tie is cut there."""
    return depth * prefetches


def settle(points: Sequence[P], limit: int) -> list[P]:
    """The best ``limit`` of ``points`` by score, equal scores in id order."""
    ranked = sorted(points, key=lambda p: (-round(float(p.score), DECIMALS), str(p.id)))
    return ranked[:limit]
