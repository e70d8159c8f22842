"""Sentence vectors: a record of several sentences ranked by its best one as well as by itself.

A turn of a conversation often says several things ("We went camping last week. The kids
loved the lake. I'm off to a pottery class now."), and its one vector is the mean of them:
a question about one of them finds it less similar than a short turn that says only that.
So a writer may store, beside a record's vector, a vector per sentence (each with the
record's leading label, e.g. its speaker and date, so a sentence still says who said it and
when), in the payload key ``KEY``; among a hybrid search's candidates (everything its lists
brought, dense and lexical, no extra engine call) the dense side then scores each record by
the best of its own cosine and its sentences', and is ranked again by that before fusion
(:func:`rescore`). A record without them keeps its own cosine. Measured on LoCoMo, both
splits (``benchmarks/locomo_recall.py``, docs/benchmarks.md).

The vectors live in the record's payload (one string: per sentence a float32 scale and the
int8 components, base64), so they carry the record's owner, are deleted and forgotten with
it, and travel through every store operation (index rebuilds, migrations) unchanged; a
payload of a few hundred bytes per sentence, where a named multivector would have changed
both backends' collections. A record's readers never see it: services map payloads to their
own records field by field.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from memory_services.store.base import Retrieval

#: The payload key of a record's sentence vectors.
KEY = "sentence_vectors"
#: Sentences embedded per record at most (the first ones): a record of 4,000 characters
#: could hold forty; each costs an embedding at ingest.
MOST = 16
#: Words a sentence needs to be embedded alone (shorter ones join the next): 1, every
#: sentence. Six would embed 1.6 texts per LoCoMo turn instead of 2.9, but lost a third of
#: the gain at @10 and multi-hop on both splits (docs/benchmarks.md).
SHORTEST = 1
#: A sentence ends at ".", "!" or "?" followed by white space.
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
#: A leading label ("Caroline (1:56 pm on 8 May, 2023): ", "user: "): the text before the
#: first ": ", kept on every sentence when it ends within the first sentence.
_LABEL = re.compile(r"^([^\n]{1,100}?):\s+")
_SCALE = np.dtype("<f4")


def split(text: str, most: int = MOST, shortest: int = SHORTEST) -> list[str]:
    """The texts to embed for ``text``'s sentences, each with its leading label (if any),
    a sentence of fewer than ``shortest`` words joined to the next (the last to the one
    before); empty when that leaves fewer than two (its own vector says it)."""
    head, body = "", text.strip()
    if (label := _LABEL.match(body)) and not _SENTENCE.search(label.group(1)):
        head, body = label.group(0), body[label.end() :]
    parts: list[str] = []
    for part in (p.strip() for p in _SENTENCE.split(body)):
        if parts and len(parts[-1].split()) < shortest:
            parts[-1] = f"{parts[-1]} {part}".strip()
        elif part:
            parts.append(part)
    if len(parts) > 1 and len(parts[-1].split()) < shortest:
        last = parts.pop()
        parts[-1] = f"{parts[-1]} {last}"
    if len(parts) < 2:
        return []
    return [head + part for part in parts[:most]]


def spans(
    text: str, most: int = MOST, shortest: int = SHORTEST, *, label: bool = False
) -> list[list[tuple[int, int]]]:
    """Where :func:`split`'s sentences lie in ``text``: per sentence its character range
    (and first the leading label's, with ``label``), for pooling the token embeddings of
    one run of the model over ``text`` (late chunking); empty where :func:`split` is."""
    start = len(text) - len(text.lstrip())
    body = text.strip()
    head: list[tuple[int, int]] = []
    if (found := _LABEL.match(body)) and not _SENTENCE.search(found.group(1)):
        head = [(start, start + found.end(1))]
        start, body = start + found.end(), body[found.end() :]
    ranges: list[tuple[int, int]] = []
    at = 0
    for gap in [*_SENTENCE.finditer(body), None]:
        end = len(body) if gap is None else gap.start()
        piece = body[at:end]
        first = at + len(piece) - len(piece.lstrip())
        last = at + len(piece.rstrip())
        at = end if gap is None else gap.end()
        if ranges and len(body[ranges[-1][0] : ranges[-1][1]].split()) < shortest:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        elif last > first:
            ranges.append((first, last))
    if len(ranges) > 1 and len(body[ranges[-1][0] : ranges[-1][1]].split()) < shortest:
        ranges[-2] = (ranges[-2][0], ranges.pop()[1])
    if len(ranges) < 2:
        return []
    return [[*(head if label else []), (start + a, start + b)] for a, b in ranges[:most]]


def encode(vectors: Sequence[Sequence[float]]) -> str:
    """Vectors as the payload value: per vector its largest magnitude (float32) and its
    components scaled to int8, base64 (cosines change by about 1e-3)."""
    rows = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    scales = np.abs(rows).max(axis=1, keepdims=True)
    scales[scales == 0] = 1.0
    quantised = np.round(rows / scales * 127).astype(np.int8)
    packed = b"".join(
        scale.astype(_SCALE).tobytes() + row.tobytes()
        for scale, row in zip(scales, quantised, strict=True)
    )
    return base64.b64encode(packed).decode("ascii")


def decode(value: object, size: int) -> np.ndarray | None:
    """The vectors of a payload value (rows of ``size``), or None if there are none or the
    value is not one :func:`encode` wrote for that size."""
    raw = _raw(value, size)
    return None if raw is None else _rows(raw, size)


def _raw(value: object, size: int) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:  # strict: what base64.b64decode(validate=True) checks, without its regex pass
        raw = binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    return raw if raw and not len(raw) % (_SCALE.itemsize + size) else None


def _rows(raw: bytes, size: int) -> np.ndarray:
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _SCALE.itemsize + size)
    scales = rows[:, : _SCALE.itemsize].copy().view(_SCALE).astype(np.float64)
    components = rows[:, _SCALE.itemsize :].copy().view(np.int8).astype(np.float64)
    return components * (scales / 127)


class Candidate(Protocol):
    """A point a search's list brought (the engine's, or :class:`Rescored`)."""

    @property
    def id(self) -> Any: ...

    @property
    def score(self) -> float: ...

    @property
    def payload(self) -> Mapping[str, Any] | None: ...

    @property
    def vector(self) -> Any: ...


class Point:
    """A candidate as read once from the engine's point, whose id and payload are made anew
    at every read (a Qdrant Edge point's id is a new ``UUID``, its payload a new dict) while
    fusion reads each several times. Its vector is read through only when asked (for the
    few that fusion keeps). A plain class: made for every candidate of every search."""

    __slots__ = ("id", "payload", "point", "score")

    def __init__(
        self, id: str, score: float, payload: Mapping[str, Any] | None, point: Candidate
    ) -> None:
        self.id, self.score, self.payload, self.point = id, score, payload, point

    @property
    def vector(self) -> Any:
        return self.point.vector


def read(lists: Sequence[Sequence[Candidate]]) -> tuple[list[list[Point]], dict[str, Point]]:
    """``lists`` with each point read once (its payload once per record, however many lists
    brought it; its id made a string once per record too), and each record's first point by
    id."""
    first: dict[str, Point] = {}
    # By the id as read: a UUID's int (a UUID's hash and == are Python methods, and the
    # binding makes a new one at every read), else its string (never equal to an int).
    by_key: dict[object, Point] = {}
    out: list[list[Point]] = []
    for found in lists:
        points = []
        for point in found:
            id = point.id
            seen = id.int if type(id) is uuid.UUID else str(id)
            known = by_key.get(seen)
            if known is None:
                key = str(id)
                known = by_key[seen] = first[key] = Point(key, point.score, point.payload, point)
                points.append(known)
            else:
                points.append(Point(known.id, point.score, known.payload, point))
        out.append(points)
    return out, first


def rescore(
    lists: Sequence[Sequence[Candidate]],
    kinds: Sequence[str],
    query: Sequence[float],
    retrieval: Retrieval,
    min_score: float | None = None,
) -> list[list[Point]]:
    """``lists`` (one hybrid search's, as :func:`.ties.sides` orders them, each point read
    once: :func:`read`) with each dense list replaced by the candidates it could hold,
    scored by the best of their own cosine and their sentences': every candidate for the
    lists under the filter, the candidates of the boosted lists (which meet the boost) for
    those under the boost. Lexical lists stay as they are; so does everything when
    ``retrieval.sentence_max`` is off. A candidate scored below ``min_score`` (the dense
    side's bound) is left out of the dense lists.

    A candidate only a lexical list brought has its own cosine at or below the last one of
    the dense list (which holds the nearest records, a margin beyond what fusion reads),
    which every record of that list keeps or betters: it can enter the part fusion reads
    only by its sentences, so it is scored by them alone, and left out without them (no
    vector of it is read)."""
    found, points = read(lists)
    if not retrieval.sentence_max or "dense" not in kinds or "lexical" not in kinds:
        return found
    unit = np.asarray(query, dtype=np.float64)
    unit /= np.linalg.norm(unit)
    cosine: dict[str, float] = {}  # the engine's, where a dense list brought the point
    for part, kind in zip(found, kinds, strict=True):
        if kind == "dense":
            for point in part:
                cosine[point.id] = float(point.score)
    by_sentences = _best_sentences(points, unit)
    best: dict[str, Point] = {}  # in the order the lists first brought each candidate
    for key, point in points.items():
        own, sentence = cosine.get(key), by_sentences.get(key)
        score = own if sentence is None else sentence if own is None else max(own, sentence)
        if score is not None and (min_score is None or score >= min_score):
            best[key] = Point(key, score, point.payload, point.point)
    rescored: list[list[Point]] = []
    for n, (part, kind) in enumerate(zip(found, kinds, strict=True)):
        if kind != "dense":
            rescored.append(part)
        elif n < 2:  # every list's candidates: those ``best`` holds, in its order
            rescored.append(list(best.values()))
        else:
            pool = dict.fromkeys(p.id for each in found[2:] for p in each)
            rescored.append([best[key] for key in pool if key in best])
    return rescored


def _best_sentences(points: Mapping[str, Point], unit: np.ndarray) -> dict[str, float]:
    """The best cosine to ``unit`` of each point's sentences (points with none left out),
    all decoded and scored in one product; a row's scale cancels out of its cosine, so the
    int8 components suffice."""
    size, width = len(unit), _SCALE.itemsize + len(unit)
    keys: list[str] = []
    raws: list[bytes] = []
    for key, point in points.items():
        payload = point.payload
        if payload and (raw := _raw(payload.get(KEY), size)) is not None:
            keys.append(key)
            raws.append(raw)
    if not raws:
        return {}
    packed = np.frombuffer(b"".join(raws), dtype=np.uint8).reshape(-1, width)
    components = packed[:, _SCALE.itemsize :].view(np.int8).astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", components, components))
    norms[norms == 0] = 1.0
    # Each point's rows lie together: the best of each run (every point has one row or more).
    starts = np.zeros(len(raws), dtype=np.intp)
    np.cumsum([len(raw) // width for raw in raws[:-1]], out=starts[1:])
    best = np.maximum.reduceat((components @ unit) / norms, starts)
    return dict(zip(keys, best.tolist(), strict=True))
