"""Qdrant Edge requests for dense, lexical and hybrid search, and the lexical vector's upkeep.

Hybrid search is the engine's Query API: a dense and a lexical prefetch, each under the scope
filter, fused by RRF (weighted) or DBSF; the fused query carries the filter too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as qe

from memory_services.store import checks, lexical, ties
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


def request(
    vector: list[float],
    text: str | None,
    *,
    selected: qe.Filter,
    limit: int,
    min_score: float | None,
    retrieval: Retrieval,
    boosted: qe.Filter | None = None,
) -> qe.QueryRequest:
    """One search: dense when there is no text (or ``retrieval`` says so), else lexical or
    the fusion of both (and of both again under ``boosted``, when given)."""
    ranked = text is not None and retrieval.mode != "dense"  # scores are cosines: need vectors
    common: dict[str, Any] = {"limit": limit, "with_payload": True, "with_vector": ranked}
    if text is None or retrieval.mode == "dense":
        dense = qe.Query.Nearest(vector)
        return qe.QueryRequest(query=dense, filter=selected, score_threshold=min_score, **common)
    terms = qe.Query.Nearest(sparse(lexical.query(text)), using=lexical.VECTOR)
    if retrieval.mode == "lexical":
        return qe.QueryRequest(query=terms, filter=selected, **common)
    depth, prefetches = retrieval.candidates(limit), []
    for where in [selected] if boosted is None else [selected, boosted]:
        prefetches += [
            qe.Prefetch(
                depth, query=qe.Query.Nearest(vector), filter=where, score_threshold=min_score
            ),
            qe.Prefetch(depth, query=terms, filter=where),
        ]
    fusion: Any = (
        qe.Fusion.Rrf(k=retrieval.rrf_k, weights=list(retrieval.weights) * (len(prefetches) // 2))
        if retrieval.fusion == "rrf"
        else qe.Fusion.Dbsf()
    )
    common["limit"] = ties.fused_limit(depth, len(prefetches))  # cut here, not by the engine
    return qe.QueryRequest(query=fusion, prefetches=prefetches, filter=selected, **common)


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


def hits(points: list[qe.ScoredPoint], vector: list[float], limit: int) -> list[Hit]:
    """The best ``limit`` (equal scores in id order: :mod:`.ties`), scored by cosine: the
    engine's scores where it ranked by the dense vector, else computed from the vectors the
    request brought back."""
    points = ties.settle(points, limit)
    scores = [p.score for p in points]
    if points and points[0].vector is not None:
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
