"""A hybrid search reads each engine point once: the Qdrant Edge binding makes a point's id
(a new ``UUID``) and payload (a new dict) anew at every read, and fusion reads them several
times per candidate (about 150 candidates for a top 20), so ``sentences.rescore`` reads each
candidate's id once per list, each record's payload once, and a vector only for the records
fusion keeps. And sentence vectors decode, without ``base64``'s regex pass, exactly what the
validating decoder accepts.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_services.store import edge_query, sentences
from memory_services.store.base import Retrieval

SIZE = 8
UNIT = [1.0] + [0.0] * (SIZE - 1)


class EnginePoint:
    """A point as the engine's binding hands it out: every read of ``id``, ``payload``
    or ``vector`` is counted, and makes a new object, as the binding does."""

    reads: Counter[tuple[str, str]] = Counter()

    def __init__(self, key: uuid.UUID, score: float, payload: dict[str, Any], vector: list[float]):
        self._key, self.score = key, score
        self._payload, self._vector = payload, vector

    @property
    def id(self) -> uuid.UUID:
        EnginePoint.reads[str(self._key), "id"] += 1
        return uuid.UUID(str(self._key))

    @property
    def payload(self) -> dict[str, Any]:
        EnginePoint.reads[str(self._key), "payload"] += 1
        return dict(self._payload)

    @property
    def vector(self) -> dict[str, list[float]]:
        EnginePoint.reads[str(self._key), "vector"] += 1
        return {"": list(self._vector)}


def _candidates(count: int) -> tuple[list[list[EnginePoint]], dict[str, tuple[float, ...]]]:
    """A dense and a lexical list sharing half their records; every third record with
    sentence vectors; neighbours in one thread."""
    rng = np.random.default_rng(7)
    records = []
    for n in range(count):
        vector = rng.normal(size=SIZE)
        vector /= np.linalg.norm(vector)
        payload: dict[str, Any] = {"content": f"turn {n} " + "word " * (n % 30), "thread": "t"}
        payload["seq"] = n
        if n % 3 == 0:
            payload[sentences.KEY] = sentences.encode(rng.normal(size=(2, SIZE)).tolist())
        records.append((uuid.UUID(int=n + 1), vector.tolist(), payload))
    dense = sorted(records, key=lambda r: -float(np.dot(UNIT, r[1])))[: count * 2 // 3]
    lexical = records[count // 3 :]
    lists = [
        [EnginePoint(k, float(np.dot(UNIT, v)), p, v) for k, v, p in dense],
        [EnginePoint(k, 10.0 - n * 0.1, p, v) for n, (k, v, p) in enumerate(lexical)],
    ]
    return lists, {str(k): tuple(v) for k, v, _ in records}


def test_a_hybrid_search_reads_each_point_once_and_only_the_winners_vectors() -> None:
    lists, _ = _candidates(60)
    EnginePoint.reads.clear()
    hits = edge_query.hits(lists, ["dense", "lexical"], UNIT, 10, Retrieval())  # type: ignore[arg-type]
    assert len(hits) == 10
    occurrences = Counter(str(p._key) for found in lists for p in found)
    for key, times in occurrences.items():
        assert EnginePoint.reads[key, "id"] == times, key
        assert EnginePoint.reads[key, "payload"] == 1, key
    vectors_read = {key for (key, what), n in EnginePoint.reads.items() if what == "vector"}
    assert vectors_read == {hit.id for hit in hits}


def test_reading_once_ranks_as_reading_every_time() -> None:
    """The winners, their scores (cosines of their own vectors) and payloads are those of
    the same candidates handed over as plain, already-read points."""
    lists, vectors = _candidates(60)
    plain = [
        [sentences.Point(str(p._key), p.score, dict(p._payload), p) for p in found]
        for found in lists
    ]
    for retrieval in (Retrieval(), Retrieval(sentence_max=False), Retrieval(fusion="dbsf")):
        hits = edge_query.hits(lists, ["dense", "lexical"], UNIT, 10, retrieval)  # type: ignore[arg-type]
        again = edge_query.hits(plain, ["dense", "lexical"], UNIT, 10, retrieval)  # type: ignore[arg-type]
        assert [(h.id, h.score, h.payload) for h in hits] == [
            (h.id, h.score, h.payload) for h in again
        ]
        for hit in hits:
            assert abs(hit.score - float(np.dot(UNIT, vectors[hit.id]))) < 1e-9


def _stdlib(value: str, size: int) -> bytes | None:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if raw and not len(raw) % (4 + size) else None


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ABCDEFab0123+/= \n!é", max_size=24))
def test_a_value_decodes_as_the_validating_base64_decoder_reads_it(value: str) -> None:
    expected = _stdlib(value, 1)
    rows = sentences.decode(value, 1)
    if expected is None:
        assert rows is None
    else:
        assert rows is not None and rows.shape == (len(expected) // 5, 1)


def test_a_value_written_by_encode_still_decodes() -> None:
    value = sentences.encode([[0.5, -0.25, 1.0]] * 3)
    rows = sentences.decode(value, 3)
    assert rows is not None and rows.shape == (3, 3)
    assert _stdlib(value, 3) is not None


def test_records_are_told_apart_by_their_ids_whatever_their_type() -> None:
    """A UUID and the integer of the same bits are two records (their ids as strings
    differ); the same UUID read anew in another list is one."""
    same = uuid.UUID(int=7)
    number = sentences.Point(7, 5.0, {"n": 2}, EnginePoint(same, 0.0, {}, UNIT))  # type: ignore[arg-type]
    lists = [[EnginePoint(same, 0.9, {"n": 1}, UNIT)], [number, EnginePoint(same, 4.0, {}, UNIT)]]
    found, first = sentences.read(lists)  # type: ignore[arg-type]
    assert list(first) == [str(same), "7"]
    assert [p.payload for p in found[1]] == [{"n": 2}, {"n": 1}]
