"""Ranking that does not depend on the process or the store's layout: fusion done here.

Two runs of one benchmark gave a different hybrid top 10 for one question in nine: equal
scores came back in an order set by the engine (its fusion's hash map, seeded per process;
the order of points in segments, which background indexing changes), and RRF turns an
order among equals into different ranks. So a hybrid search asks the engine for each side's
list (dense, lexical, and both again under a boost) and fuses them here, and every list is
put in one order first: by score, then by id. Scores are compared at a fixed number of
decimals, so that sums added in another order (a last-bit difference in 32-bit floats) are
equal too. Each list is fetched a little deeper than it is used, so a tie at its end is cut
here too.

RRF gives a record ``weight / (k + rank)`` from each list it is in (rank from 1); DBSF
scales each list's scores by its mean and three standard deviations to [0, 1] and sums.

Neighbours: records a writer stored as a sequence carry a ``thread`` (one per write) and a
``seq`` (their place in it): the turns of a conversation's session, in order. The evidence
for a question often sits in the turn next to the one that matches its words (the answer
after the question, the detail after the topic), so among the fused candidates each record
adds ``neighbour_lift`` of its neighbour's fused score (the larger neighbour's, not both):
measured on LoCoMo, on both of its splits, in ``benchmarks/locomo_recall.py``. Only
candidates are lifted (no extra engine call), and the result depends on scores alone, so
ties still fall by id.

Priors: a fact's text says something about how likely it is to be what a question needs,
whatever the question. On LoCoMo a turn that only asks ("What's your best camping
memory?") is an evidence turn half as often as one that tells, and long turns (25 words or
more) are evidence turns 2.5 times as often as mid-length ones and six times as often as
short ones; BM25 already scores a long text down for its length, and the dense side does
not see it. So each fused candidate's score is scaled by ``1 - ask_discount`` when its
``content`` ends with "?", and by ``1 + length_prior * log(words / 24)`` (24: chosen on
LoCoMo's tuning split, where a turn with its speaker and date has 30 words on average),
kept within [0.8, 1.2]: a short fact loses at most a fifth, and facts of a few words all
lose the same, so they keep their order among themselves. Records with no ``content``
(other services' collections) are left as they are. The factor's bounds leave most
candidates' texts unread: one that stays below the best ``limit`` at its highest factor
cannot lead (:func:`_may_lead`). Measured on both LoCoMo splits
(``benchmarks/locomo_multihop.py``, ``benchmarks/locomo_recall.py``).
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from memory_services.store.base import Retrieval

#: Decimals of a score that count: cosines and fused scores (under 1), BM25 sums (up to ~50).
DECIMALS = {"dense": 6, "lexical": 4}
#: Extra candidates fetched per list beyond those used, so ties at its end are cut here.
MARGIN = 10
#: Payload keys of a record's write (a string) and its place in that write (an integer).
THREAD, SEQ = "thread", "seq"
#: The payload key of the text the priors read, the words of an average one, and the
#: bounds of the length prior's factor.
TEXT, AVERAGE_WORDS, LENGTH_BOUNDS = "content", 24, (0.8, 1.2)
#: More than a score's last counting decimal can move in rounding (with room for the
#: bounds' own rounding): records further below the best ``limit`` cannot tie with them.
_MARGIN = 2e-6

Side = Literal["dense", "lexical"]


class Scored(Protocol):
    @property
    def id(self) -> object: ...

    @property
    def score(self) -> float: ...

    @property
    def payload(self) -> Mapping[str, Any] | None: ...


P = TypeVar("P", bound=Scored)


def sides(retrieval: Retrieval, boosted: bool) -> list[Side]:
    """The lists a search fetches, in order (under the filter, then under the boost)."""
    one: list[Side] = ["dense", "lexical"] if retrieval.mode == "hybrid" else [retrieval.mode]
    return one * 2 if boosted and retrieval.mode == "hybrid" else one


def fetch(depth: int) -> int:
    return depth + MARGIN


def settle(points: Sequence[P], limit: int, side: Side = "dense") -> list[P]:
    """The best ``limit`` of ``points`` by score, equal scores in id order."""
    places = DECIMALS[side]
    scores = [-round(float(p.score), places) for p in points]
    order = _order(scores, lambda: [_key(p.id) for p in points])  # a record once a list
    return [points[n] for n in order[:limit]]


def fuse(
    lists: Sequence[Sequence[P]], kinds: Sequence[Side], retrieval: Retrieval, limit: int
) -> list[P]:
    """The best ``limit`` of the fused ``lists`` (each of the side ``kinds`` names),
    equal fused scores in id order."""
    depth = retrieval.candidates(limit)
    ordered = [settle(found, depth, kind) for found, kind in zip(lists, kinds, strict=True)]
    fused: dict[str, float] = {}
    first: dict[str, P] = {}
    for n, found in enumerate(ordered):
        for point, score in zip(found, _scores(found, n, retrieval), strict=True):
            key = _key(point.id)
            held = fused.get(key)
            if held is None:
                fused[key], first[key] = score, point
            else:
                fused[key] = held + score
    if retrieval.neighbour_lift:
        fused = lift(fused, first, retrieval.neighbour_lift)
    places = DECIMALS["dense"]
    if retrieval.ask_discount or retrieval.length_prior:
        factor = _priors(retrieval)
        keys = _may_lead(fused, retrieval, limit)
        scores = [-round(fused[key] * factor(first[key].payload), places) for key in keys]
    else:
        keys = list(fused)
        scores = [-round(score, places) for score in fused.values()]
    return [first[keys[n]] for n in _order(scores, lambda: keys)[:limit]]


def _order(scores: list[float], ids: Callable[[], list[str]]) -> list[int]:
    """The places of ``scores``, lowest first, equal ones in the order of their ``ids``
    (distinct): sorted by id first where any are equal, then (stable) by score; each sort
    compares keys of one type, which it does fastest."""
    places: Sequence[int] = range(len(scores))
    if len(set(scores)) < len(scores):
        places = sorted(places, key=ids().__getitem__)
    return sorted(places, key=scores.__getitem__)


def _may_lead(fused: Mapping[str, float], retrieval: Retrieval, limit: int) -> list[str]:
    """The records of ``fused`` that may be among the best ``limit`` once the priors scale
    them, in its order: a prior's factor lies within known bounds, so a record whose score
    at the highest factor stays below the ``limit``-th best at the lowest (by more than
    the decimals that count) is not, and its text need not be read."""
    if len(fused) <= limit:
        return list(fused)
    low, high = LENGTH_BOUNDS if retrieval.length_prior else (1.0, 1.0)
    low *= 1 - retrieval.ask_discount
    floor = heapq.nlargest(limit, fused.values())[-1] * low - _MARGIN
    return [key for key, score in fused.items() if score * high >= floor]


def lift(
    fused: Mapping[str, float], points: Mapping[str, Scored], share: float
) -> dict[str, float]:
    """``fused`` with each record that has a neighbour among ``points`` (same thread, seq one
    apart) raised to its own score plus ``share`` of its best neighbour's."""
    place: dict[tuple[str, int], str] = {}
    for key, point in points.items():
        payload = point.payload
        if not payload:
            continue
        thread, seq = payload.get(THREAD), payload.get(SEQ)
        if type(seq) is int and type(thread) is str:  # the usual case, checked first
            place[thread, seq] = key
            continue
        if isinstance(seq, float) and seq.is_integer():
            seq = int(seq)  # a payload read back may hold a whole number as a float
        if isinstance(thread, str) and isinstance(seq, int) and not isinstance(seq, bool):
            place[thread, seq] = key
    lifted = dict(fused)
    for (thread, seq), key in place.items():
        below, above = place.get((thread, seq - 1)), place.get((thread, seq + 1))
        if below is None:
            if above is None:
                continue  # no neighbour: its own score (x + share * 0.0 is x)
            best = fused[above]
        else:
            best = fused[below] if above is None else max(fused[below], fused[above])
        lifted[key] = fused[key] + share * best
    return lifted


def prior(payload: Mapping[str, Any] | None, retrieval: Retrieval) -> float:
    """The factor a record's fused score is scaled by for what its text looks like (1.0
    for a record without a ``content`` string)."""
    return _priors(retrieval)(payload)


def _priors(retrieval: Retrieval) -> Callable[[Mapping[str, Any] | None], float]:
    """:func:`prior` for ``retrieval``, its settings read once for all of a search's
    candidates."""
    asked, share = 1 - retrieval.ask_discount, retrieval.length_prior
    low, high = LENGTH_BOUNDS
    log = math.log

    def factor(payload: Mapping[str, Any] | None) -> float:
        text = payload.get(TEXT) if payload else None
        if not isinstance(text, str) or not text or text.isspace():  # not text.strip()
            return 1.0
        factor = asked if text.rstrip().endswith("?") else 1.0
        if share:
            words = len(text.split())
            factor *= min(high, max(low, 1 + share * log(words / AVERAGE_WORDS)))
        return factor

    return factor


def _key(id: object) -> str:
    return id if type(id) is str else str(id)


def _scores(found: Sequence[Scored], n: int, retrieval: Retrieval) -> list[float]:
    if retrieval.fusion == "rrf":
        weight = retrieval.weights[n % 2]
        return [weight / (retrieval.rrf_k + rank) for rank in range(1, len(found) + 1)]
    values = [float(p.score) for p in found]
    if len(values) < 2:
        return [0.5] * len(values)
    mean, sd = statistics.fmean(values), statistics.pstdev(values)
    if sd == 0:
        return [0.5] * len(values)
    low, high = mean - 3 * sd, mean + 3 * sd
    return [min(1.0, max(0.0, (v - low) / (high - low))) for v in values]
