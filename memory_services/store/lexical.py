"""Lexical term weights for the sparse vector every collection holds next to the dense one.

A document's weights are BM25's term-frequency part, ``tf·(k+1) / (tf + k·(1 - b + b·len/avg))``;
a query's are 1 per distinct term; the collection's sparse vector carries Qdrant's IDF
modifier, so the engine multiplies in each term's inverse document frequency over the
collection as it stands and a dot product is the BM25 score. Tokenising is Qdrant's own BM25
(the ``Bm25`` embedder in ``qdrant-edge-py``, the same as the server's built-in inference):
lowercasing, English stopwords, Snowball stemming, terms hashed to 32-bit indices. It runs
locally with no model, and both store backends use it, so their vectors are identical.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import qdrant_edge as qe

#: The sparse vector's name in every collection (the dense vector is the unnamed one).
VECTOR = "lexical"
#: BM25's constants; ``AVG_LEN`` is tokens per record after stopwords (a fact or a turn is a
#: sentence or two, not the 256-token passage the engine assumes by default).
K, B, AVG_LEN = 1.2, 0.75, 16.0
#: Characters of a text that are tokenised (a record's text is bounded upstream; this bounds
#: the work for any caller).
MAX_CHARS = 20_000

Sparse = tuple[list[int], list[float]]


@functools.cache
def _model() -> qe.Bm25:
    return qe.Bm25(qe.Bm25Config(k=K, b=B, avg_len=AVG_LEN, language="english"))


def document(text: str) -> Sparse:
    """A record's term weights (empty for a text of stopwords or no text)."""
    vec = _model().embed_document(text[:MAX_CHARS])
    return list(vec.indices), list(vec.values)


def query(text: str) -> Sparse:
    """A query's terms, each weighted 1."""
    vec = _model().embed_query(text[:MAX_CHARS])
    return list(vec.indices), list(vec.values)


def record_text(payload: Mapping[str, object], fields: tuple[str, ...]) -> str:
    """The text of ``payload`` that a record's lexical vector is computed from: the values
    of ``fields`` (strings, or lists of strings), one per line."""
    lines: list[str] = []
    for field in fields:
        value = payload.get(field)
        items = value if isinstance(value, list) else [value]
        lines += [item for item in items if isinstance(item, str) and item]
    return "\n".join(lines)
