"""How a memory search ranks, as a request may ask: by meaning (the dense vector), by words
(BM25 over the record's text), or both fused; unset fields take the service's default
(hybrid, reciprocal-rank fusion, equal weights)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from react_mem.schema.base import WireModel

#: Longest query vector a request may carry (the largest embedding models' dimension is
#: 4,096): a vector of a million numbers is refused when decoded, not read.
MAX_VECTOR_DIMENSION = 8192

RetrievalMode = Literal["dense", "lexical", "hybrid"]
FusionMethod = Literal["rrf", "dbsf"]


class RetrievalOptions(WireModel):
    mode: RetrievalMode | None = None
    #: hybrid: rank records dated within a time the query names ("in May 2023", "last
    #: week") higher (default: on).
    time_boost: bool | None = None
    fusion: FusionMethod | None = None
    #: rrf: how much each side's ranks count (DBSF normalises scores and has no weights).
    dense_weight: float | None = Field(default=None, ge=0.0, le=100.0)
    lexical_weight: float | None = Field(default=None, ge=0.0, le=100.0)
    #: hybrid: the share of a hit's fused score its neighbours (stored next to it in one
    #: write) gain (default 0.25; 0: off).
    neighbour_lift: float | None = Field(default=None, ge=0.0, le=1.0)
    #: hybrid: scale a fact's score by what its text looks like: down when it only asks a
    #: question, up or down (a fifth at most) for its length (default: on).
    priors: bool | None = None
    #: hybrid: the dense side scores a record that holds a vector per sentence (fact memory
    #: stores them for a fact of two sentences or more) by its best sentence too, among the
    #: candidates the search brings (default: on).
    sentences: bool | None = None
