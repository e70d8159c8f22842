"""Fusion reads the text of only the candidates that may lead: a prior's factor is bounded,
so a candidate that stays below the best ``limit`` at its highest factor is left out before
its text is read. The best ``limit`` are those of the whole ranking, in its order, whatever
the lists, the weights, the priors and the neighbours.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_services.store import Retrieval, ties

TEXTS = [
    "what is your best camping memory?",
    "my best camping trip was on the beach",
    "ok",
    "  ",
    "we went camping in the mountains with the whole family last summer and it was the best "
    "trip we ever had, the kids hiked every morning and swam in a cold clear lake",
    "did you like it ?  ",
]


@dataclass(frozen=True)
class Point:
    id: str
    score: float
    payload: Mapping[str, Any] | None


class CountingPayload(dict[str, Any]):
    """A payload that counts the reads of its text."""

    reads: Counter[str] = Counter()

    def get(self, key: str, default: Any = None) -> Any:
        if key == ties.TEXT:
            CountingPayload.reads[str(self.get("id"))] += 1
        return super().get(key, default)


def _payload(n: int, text: int | None, seq: int | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"id": n}
    if text is not None:
        payload[ties.TEXT] = TEXTS[text]
    if seq is not None:
        payload |= {ties.THREAD: "t", ties.SEQ: seq}
    return payload


records = st.lists(
    st.tuples(st.none() | st.integers(0, len(TEXTS) - 1), st.none() | st.integers(0, 40)),
    min_size=1,
    max_size=60,
)
retrievals = st.builds(
    Retrieval,
    fusion=st.sampled_from(["rrf", "dbsf"]),
    weights=st.tuples(st.floats(0.1, 3.0), st.floats(0.0, 3.0)),
    depth=st.integers(1, 60),
    neighbour_lift=st.sampled_from([0.0, 0.25, 1.0]),
    # Narrow bounds (a tiny discount, no length prior) leave no room to spare.
    ask_discount=st.sampled_from([0.0, 1e-9, 1e-6, 0.3, 1.0]),
    length_prior=st.sampled_from([0.0, 1e-9, 0.3, 1.0]),
)


@settings(max_examples=300, deadline=None)
@given(
    records,
    st.randoms(use_true_random=False),
    retrievals,
    st.integers(1, 30),
    st.booleans(),
    st.integers(0, 3),
)
def test_the_best_few_are_the_head_of_the_whole_ranking(
    found: list[tuple[int | None, int | None]],
    rng: Any,
    retrieval: Retrieval,
    limit: int,
    boosted: bool,
    decimals: int,
) -> None:
    """Scores rounded to few decimals make ties (broken by id) at every place."""
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in found]
    payloads = [_payload(n, text, seq) for n, (text, seq) in enumerate(found)]
    kinds: list[ties.Side] = ["dense", "lexical"] * (2 if boosted else 1)
    lists = []
    for kind in kinds:
        chosen = rng.sample(range(len(found)), rng.randint(0, len(found)))
        scale = 1.0 if kind == "dense" else 20.0
        lists.append(
            [Point(ids[n], round(rng.random() * scale, decimals), payloads[n]) for n in chosen]
        )
    whole = ties.fuse(lists, kinds, retrieval, len(found))  # every candidate: none left out
    best = ties.fuse(lists, kinds, retrieval, limit)
    assert [p.id for p in best] == [p.id for p in whole[:limit]]


def test_the_text_of_a_candidate_far_below_the_best_is_not_read() -> None:
    """Eighty candidates, each in one list at its own rank: of a top 5, only those within a
    prior's reach of the fifth have their text read."""
    count = 80
    points = [
        Point(str(uuid.UUID(int=n + 1)), 1.0 - n / count, CountingPayload(_payload(n, 1, None)))
        for n in range(count)
    ]
    CountingPayload.reads.clear()
    best = ties.fuse([points, []], ["dense", "lexical"], Retrieval(depth=count), 5)
    assert [p.id for p in best] == [p.id for p in points[:5]]
    read = set(CountingPayload.reads)
    assert {str(n) for n in range(5)} <= read
    assert len(read) < count // 2


def test_a_candidate_just_below_the_best_that_ties_it_once_rounded_is_kept() -> None:
    """Fused scores 0.1666674 and 0.1666666 both count as 0.166667: the tie goes by id, so
    the lower one, with the smaller id, leads; the bounds must not leave it out."""
    first = Point(str(uuid.UUID(int=2)), 1.0, _payload(0, 1, None))
    second = Point(str(uuid.UUID(int=1)), 1.0, _payload(1, 1, None))
    retrieval = Retrieval(
        weights=(6 * 0.1666674, 6 * 0.1666666), depth=1, ask_discount=1e-9, length_prior=0.0
    )
    best = ties.fuse([[first], [second]], ["dense", "lexical"], retrieval, 1)
    assert [p.id for p in best] == [second.id]
