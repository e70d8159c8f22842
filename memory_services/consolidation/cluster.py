"""Star clustering of near-duplicates: every member is close to the cluster's survivor.

Candidates are visited best first; each one still free becomes a survivor and takes every
free candidate of its group whose cosine similarity to it is at or above the threshold.
Unlike connected components, this never chains A~B~C into one cluster when A and C differ:
each absorbed memory is within the threshold of the content that is kept. Similarity alone
does not decide: ``allow`` (the memory kind's merge guard) may refuse any pair.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

#: Rows compared per matrix product (bounds memory at BLOCK x candidates floats).
BLOCK = 256


@dataclass(frozen=True)
class Cluster:
    """Indexes into the candidate list: the survivor, and (member, similarity) pairs."""

    survivor: int
    members: list[tuple[int, float]]


def star_clusters(
    vectors: Sequence[Sequence[float]],
    order: Sequence[int],
    groups: Sequence[Hashable],
    threshold: float,
    allow: Callable[[int, int], bool] = lambda survivor, member: True,
) -> list[Cluster]:
    """Clusters of ``vectors`` (one per candidate), visiting candidates in ``order`` (best
    first); only candidates with equal ``groups`` entries, and that ``allow(survivor,
    member)`` (candidate indexes), may share a cluster. Members are listed in ``order``,
    singletons are left out."""
    n = len(order)
    if n < 2:
        return []
    units = np.asarray([vectors[i] for i in order], dtype=np.float32)
    norms = np.linalg.norm(units, axis=1, keepdims=True)
    units /= np.where(norms == 0, 1.0, norms)
    labels: dict[Hashable, int] = {}
    group = np.asarray([labels.setdefault(groups[i], len(labels)) for i in order])
    free = np.ones(n, dtype=bool)
    found: list[Cluster] = []
    for start in range(0, n, BLOCK):
        stop = min(start + BLOCK, n)
        columns = np.flatnonzero(free[start:]) + start
        sims = units[start:stop] @ units[columns].T
        for row in range(start, stop):
            if not free[row]:
                continue
            free[row] = False
            row_sims = sims[row - start]
            hit = (row_sims >= threshold) & free[columns] & (group[columns] == group[row])
            for at in np.flatnonzero(hit):
                hit[at] = allow(order[row], order[int(columns[at])])
            if hit.any():
                free[columns[hit]] = False
                pairs = zip(columns[hit], row_sims[hit], strict=True)
                members = [(order[int(c)], float(s)) for c, s in pairs]
                found.append(Cluster(order[row], members))
    return found
