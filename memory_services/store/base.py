"""The vector-store seam: scoped records with payloads, searched by cosine similarity.

Every read and write that can touch more than named ids takes a scope, and every query a
backend sends carries the scope's payload filter: asking without one is a programming error
and fails loudly (:class:`ScopeRequired`). A request's scope is a :class:`Scope` (one
owner, see :mod:`react_mem.schema.scope`); only maintenance passes use :class:`AllOwners`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from react_mem.schema.scope import SCOPE_KEYS, Scope, ScopeRequired

__all__ = [
    "SCOPE_KEYS",
    "AllOwners",
    "CollectionSpec",
    "Condition",
    "FieldType",
    "Hit",
    "Record",
    "Retrieval",
    "Scope",
    "ScopeRequired",
    "StoreScope",
    "VectorStore",
    "require_scope",
    "scope_matches",
]


@dataclass(frozen=True, slots=True)
class AllOwners:
    """Every owner's records of one collection: for maintenance only (retention sweeps,
    idle conversations, a collection's quota, scheduled consolidation), never a request.

    A distinct type, not a :class:`Scope` with a wildcard, so no request path can reach it:
    request handlers take a :class:`Scope`, and the modules that may name this type are
    listed in the tests.
    """

    workspace: str
    collection: str

    def __post_init__(self) -> None:
        if not self.workspace or not self.collection:
            raise ScopeRequired("a scope needs a workspace and a collection")


#: What a store query is confined to: one owner (a request), or a maintenance pass.
StoreScope = Scope | AllOwners


def require_scope(scope: object) -> StoreScope:
    if not isinstance(scope, Scope | AllOwners):
        raise ScopeRequired(f"store query without a scope (got {scope!r})")
    return scope


def scope_matches(scope: StoreScope) -> tuple[dict[str, str], bool]:
    """The scope keys a record must hold, and whether it must hold no ``scope_user``
    (a user-less request sees only the collection's shared records)."""
    scope = require_scope(scope)
    if isinstance(scope, AllOwners):
        return {SCOPE_KEYS[0]: scope.workspace, SCOPE_KEYS[1]: scope.collection}, False
    return scope.payload(), scope.user is None


class FieldType(StrEnum):
    KEYWORD = "keyword"
    INTEGER = "integer"
    FLOAT = "float"
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class Condition:
    """One payload condition; exactly one of the matchers is set."""

    key: str
    equals: str | int | bool | None = None
    any_of: Sequence[str | int] | None = None
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    #: True: the key is absent, null or an empty list (Qdrant's is-empty); False: the opposite.
    missing: bool | None = None


@dataclass(frozen=True, slots=True)
class Record:
    id: str  # a UUID string (both Qdrant engines require UUID or integer ids)
    payload: Mapping[str, Any]
    vector: Sequence[float] | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result. ``score`` is its cosine similarity to the query vector whatever the
    ranking (a lexical or hybrid search orders hits by its own scores, then reports this)."""

    id: str
    score: float
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    """A collection: its name should show the kind and vector size, e.g. ``facts-384``.

    Every collection holds a sparse lexical vector next to the dense one; ``text_fields``
    name the payload fields it is computed from at each upsert (none: no lexical vector, so
    lexical and hybrid searches fall back to dense). A later payload change does not
    recompute it: the fields should be ones a record keeps for life."""

    name: str
    vector_size: int
    indexes: Mapping[str, FieldType] = field(default_factory=dict)
    text_fields: tuple[str, ...] = ()


Mode = Literal["dense", "lexical", "hybrid"]
FusionKind = Literal["rrf", "dbsf"]


@dataclass(frozen=True, slots=True)
class Retrieval:
    """How a search with query text ranks: by the dense vector, the lexical (BM25) one, or
    both fused by Qdrant's Query API (each side a prefetch under the same scope filter).

    ``min_score`` (a cosine) bounds the dense side only; lexical scores are BM25 sums.
    ``weights`` (dense, lexical) weigh RRF's ranks; DBSF normalises scores and has none.
    ``depth`` is how many candidates each prefetch brings (0: four times the limit, at
    least 20). ``neighbour_lift``: among a hybrid search's candidates, records stored next to
    each other (the same ``thread``, ``seq`` one apart: see :mod:`.ties`) add this share of
    each other's fused score (0: off); records without those keys are left as they are.
    ``ask_discount`` and ``length_prior``: a hybrid candidate's fused score is scaled by what
    its ``content`` looks like: by ``1 - ask_discount`` when it only asks (ends with "?"), by
    ``1 + length_prior * log(words / 24)``, kept within [0.8, 1.2], for its length (0: off;
    see :mod:`.ties`). ``sentence_max``: among a hybrid search's candidates, the dense side
    scores a record that holds sentence vectors by the best of its own cosine and its
    sentences' (see :mod:`.sentences`)."""

    mode: Mode = "hybrid"
    fusion: FusionKind = "rrf"
    weights: tuple[float, float] = (1.0, 1.0)
    rrf_k: int = 5
    depth: int = 0
    neighbour_lift: float = 0.25
    ask_discount: float = 0.3
    length_prior: float = 0.3
    sentence_max: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("dense", "lexical", "hybrid"):
            raise ValueError(f"retrieval mode must be dense, lexical or hybrid, not {self.mode!r}")
        if self.fusion not in ("rrf", "dbsf"):
            raise ValueError(f"fusion must be rrf or dbsf, not {self.fusion!r}")
        if len(self.weights) != 2 or not all(0 <= w <= 100 for w in self.weights):
            raise ValueError("weights must be two numbers (dense, lexical) within [0, 100]")
        if not sum(self.weights):
            raise ValueError("at least one weight must be positive")
        if self.rrf_k < 1 or not 0 <= self.depth <= 1000:
            raise ValueError("rrf_k must be positive and depth within [0, 1000]")
        if not 0 <= self.neighbour_lift <= 1:
            raise ValueError("neighbour_lift must be within [0, 1]")
        if not 0 <= self.ask_discount <= 1 or not 0 <= self.length_prior <= 1:
            raise ValueError("ask_discount and length_prior must be within [0, 1]")

    def candidates(self, limit: int) -> int:
        return self.depth or max(4 * limit, 20)


#: What a search ranks by when the caller names nothing.
DEFAULT_RETRIEVAL = Retrieval()


class VectorStore(Protocol):
    async def open(self) -> None: ...

    async def ensure(self, spec: CollectionSpec) -> None:
        """Create the collection (with scope-key and ``indexes`` payload indexes) if absent."""

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        """Insert or replace; each record's payload must already hold its scope keys."""

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        text: str | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[Hit]:
        """The records nearest ``vector``; given the query ``text`` too, ranked as
        ``retrieval`` says (without it, or in a collection with no text field: dense). In
        hybrid mode, records that also meet ``boost`` rank higher: both sides are fetched
        again under it and the four lists fused (e.g. a question's time range).

        ``leave_out``: payload keys the engine does not read for any candidate and the hits
        do not hold (a record's bulk the caller has no use for, e.g. an episode's steps);
        not keys the ranking reads (the text, ``thread``/``seq``, sentence vectors)."""

    async def search_many(
        self,
        collection: str,
        vectors: Sequence[Sequence[float]],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        texts: Sequence[str] | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[list[Hit]]:
        """:meth:`search` for each vector (and its text in ``texts``), as one batch."""

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        """Records by id, only those inside ``scope``; vectors included."""

    async def scroll(
        self,
        collection: str,
        *,
        scope: StoreScope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        """A page of records in id order and the offset of the next page (None at the end)."""

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int: ...

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        """Merge ``payload`` into the records ``ids`` that lie inside ``scope``."""

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        """Delete records inside ``scope`` (restricted to ``ids`` when given); return how many."""

    async def compact(self, collection: str) -> bool:
        """Rewrite the collection so that deleted records leave no bytes in its files
        (segments, write-ahead log): what forgetting a user needs. False where the backend
        cannot do it on request (a Qdrant server vacuums on its own schedule)."""

    async def close(self) -> None: ...
