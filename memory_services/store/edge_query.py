"""Qdrant Edge requests for dense, lexical and hybrid search, and the lexical vector's upkeep.

Hybrid search asks the engine for a dense and a lexical list, each under the scope filter,
in one batch, and fuses them in :mod:`.ties` (RRF, weighted, or DBSF), so that equal scores
fall the same way in every process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as qe

from memory_services.store import checks, lexical, sentences, ties
from memory_services.store.base import Hit, Retrieval

logger = logging.getLogger(__name__)

#: Records given their lexical vector per engine call when an old collection is migrated.
BACKFILL_PAGE = 512
_MISSING = qe.Filter(must_not=[qe.HasVectorCondition(lexical.VECTOR)])


def sparse(pair: lexical.Sparse) -> qe.SparseVector:
    return qe.SparseVector(*pair)


def vectors(dense: list[float], payload: Mapping[str, Any], fields: tuple[str, ...]) -> Any:
    """A point's vectors: the dense one, and the lexical one of its text fields' values."""
    return {
        "": dense,
        lexical.VECTOR: sparse(lexical.document(lexical.record_text(payload, fields))),
    }


def dense_of(vector: Any) -> list[float] | None:
    """The dense vector of a point read back (a plain list, or the map of named vectors)."""
    if isinstance(vector, dict):
        vector = vector.get("")
    return list(vector) if isinstance(vector, list) else None


def requests(
    vector: list[float],
    text: str | None,
    *,
    selected: qe.Filter,
    limit: int,
    min_score: float | None,
    retrieval: Retrieval,
    boosted: qe.Filter | None = None,
    leave_out: Sequence[str] = (),
) -> tuple[list[qe.QueryRequest], list[ties.Side]]:
    """One search's engine requests: dense when there is no text (or ``retrieval`` says so),
    else lexical, or for hybrid each side's list (and both again under ``boosted``) to be
    fused by :func:`hits`; and which side each request is. Each reads every payload key but
    those in ``leave_out``."""
    payload = qe.PayloadSelector.Exclude(list(leave_out)) if leave_out else True
    if text is None or retrieval.mode == "dense":
        dense = qe.Query.Nearest(vector)
        return [
            qe.QueryRequest(
                query=dense, filter=selected, score_threshold=min_score, limit=limit,
                with_payload=payload, with_vector=False,
            )
        ], ["dense"]  # fmt: skip
    terms = qe.Query.Nearest(sparse(lexical.query(text)), using=lexical.VECTOR)
    kinds = ties.sides(retrieval, boosted is not None)
    depth = limit if retrieval.mode == "lexical" else retrieval.candidates(limit)
    wheres = [selected, selected] if boosted is None else [selected, selected, boosted, boosted]
    found = []
    for kind, where in zip(kinds, wheres, strict=False):
        query = qe.Query.Nearest(vector) if kind == "dense" else terms
        found.append(
            qe.QueryRequest(
                query=query, filter=where, limit=ties.fetch(depth), with_payload=payload,
                with_vector=True, score_threshold=min_score if kind == "dense" else None,
            )
        )  # fmt: skip
    return found, kinds


def add_lexical(shard: qe.EdgeShard, name: str, fields: tuple[str, ...]) -> int:
    """Give the shard its lexical vector if it lacks one (idempotent), and every record
    without one its vector, logging progress; return how many records were given one."""
    shard.update(qe.UpdateOperation.create_sparse_vector(lexical.VECTOR, qe.Modifier.Idf))
    total = shard.count(qe.CountRequest(exact=True, filter=_MISSING))
    if not total:
        return 0
    logger.info("re-indexing %s for lexical search: %d records", name, total)
    done = 0
    while True:
        request = qe.ScrollRequest(limit=BACKFILL_PAGE, filter=_MISSING, with_payload=True)
        page, _ = shard.scroll(request)
        if not page:
            break
        updates = [
            qe.PointVectors(r.id, {lexical.VECTOR: sparse(lexical.document(
                lexical.record_text(r.payload or {}, fields)))})
            for r in page
        ]  # fmt: skip
        shard.update(qe.UpdateOperation.update_vectors(updates))
        done += len(page)
        logger.info("re-indexing %s for lexical search: %d/%d", name, done, total)
    return done


def hits(
    lists: list[list[qe.ScoredPoint]],
    kinds: list[ties.Side],
    vector: list[float],
    limit: int,
    retrieval: Retrieval,
    min_score: float | None = None,
) -> list[Hit]:
    """The best ``limit`` of one search's lists (fused, for hybrid, after the dense side's
    candidates are scored by their sentences too: :mod:`.sentences`; equal scores in id
    order: :mod:`.ties`), scored by cosine: the engine's scores where it ranked by the dense
    vector alone, else computed from the vectors the requests brought back."""
    points: Sequence[sentences.Candidate]
    if kinds == ["dense"]:
        points = ties.settle(lists[0], limit)
        return [Hit(str(p.id), p.score, p.payload or {}) for p in points]
    if len(kinds) == 1:
        points = ties.settle(lists[0], limit, kinds[0])
    else:
        found = sentences.rescore(lists, kinds, vector, retrieval, min_score)
        points = ties.fuse(found, kinds, retrieval, limit)
    scores = checks.cosines(vector, [dense_of(p.vector) for p in points])
    return [Hit(str(p.id), s, p.payload or {}) for p, s in zip(points, scores, strict=True)]


def unindexed(info: Any, changed: int = 0) -> int:
    """Points whose dense vector lies outside an HNSW index, given ``changed``: how many points
    were given a new payload or deleted since the last index run. The engine counts each
    non-empty lexical vector as indexed too, so ``indexed_vectors_count`` runs up to twice the
    points. A point deleted from an indexed segment stays in that count, and one given a new
    payload is moved out of it (into the scanned segment) and stays in it too, its copy's
    lexical vector counted once more: each takes two off ``2 * points - indexed`` (measured at
    100k: 3,000 moved and 1,000 new points raise the count by 4,000; 2,000 deleted ones lower
    the points alone). So each changed point is added back twice. This errs high (an index
    run too soon: some changed points lay outside an index already) rather than low (searches
    scanning moved points for ever)."""
    points: int = info.points_count
    indexed: int = info.indexed_vectors_count
    return max(0, points - max(0, indexed - points) + 2 * changed)


def search_texts(texts: Sequence[str] | None, count: int) -> list[str | None]:
    if texts is None:
        return [None] * count
    if len(texts) != count:
        raise ValueError(f"{len(texts)} texts for {count} vectors")
    return list(texts)
