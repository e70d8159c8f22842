"""Fact-memory wire messages: one request and one response shape for every operation.

Operations: ``store``, ``retrieve``, ``get``, ``history``, ``list``, ``sorted``, ``update``,
``delete``, ``purge``, ``consolidate``, ``unconsolidate``, ``forget``. The scope is the flow's
workspace plus ``collection`` and the optional ``user``; ``conversation_id`` is the
conversation a stored fact was learned in (its source), and on reads and purges it narrows
the scope to facts from that conversation. Ownership (:mod:`react_mem.schema.scope`): with
``user``, a request sees and changes only that user's facts; without one (or with ``""``),
only the collection's shared facts, those stored without a user, never a user's. So
``purge`` deletes one owner's facts (the shared ones, or one user's), or one conversation's
of that owner (``conversation_id``); another owner's fact id is "not found" to every
operation.

``consolidate`` merges clusters of near-duplicate facts (cosine similarity at or above
``similarity_threshold``, and the same fact by :mod:`memory_services.dedup_guard`: never
texts that differ in a negation, number, code, name, date or content word) whose importance
is below ``importance_threshold``, within each user's facts of the scope (the request's
``conversation_id`` narrows which facts are read). Facts at or above the importance
threshold are never changed. Each cluster keeps its best member (highest importance, then
confidence, then access count, then the newest) with its id and content; it gets the
members' access counts summed, the highest importance and confidence, the latest access and
expiry, their metadata (its own keys win) and their source conversations in ``sources``, and
lists them in ``consolidated_from``. The absorbed facts become history (``current`` false,
``superseded_by`` and ``consolidated_into`` the survivor): ``get`` and ``history`` still
show them; restating one reinforces the survivor. The reply's ``consolidation`` reports the
pass; ``bytes_saved`` counts UTF-8 bytes of content, metadata and sources. ``unconsolidate``
with the pass's ``consolidation_id`` restores every absorbed fact and the survivor's fields
(counters lose what the merge added; other fields changed since keep their new value); it is
refused (``conflict``) while a later pass that merged the survivor again is not undone.
Absorbed facts count towards the quota until deleted, purged or expired (setting
``consolidation_history_ttl``); a ``purge`` of the collection or user also forgets its
passes. ``dry_run`` reports without writing. A pass is named by ``consolidation_id``
(default: the request's id), so a repeated request answers with the first report and merges
nothing twice.

``list`` pages one owner's current facts in id order (a cursor); ``sorted`` pages them in the
order ``sort_by`` names (``time``: last stored or updated; ``importance``; ``access``: the
access count, retrievals in the side table included), over every current fact of the owner
in the scope, highest first (``ascending`` reverses it), ties by id; ``offset`` is a
position there ("0", the default, "50", ...; ``next_offset`` gives the next), and ``total``
counts them all.

``forget`` removes everything ``user`` (required) owns in ``collection``, or with
``collection`` ``""`` in every collection of the workspace: facts with their history and
aliases, and the consolidation passes recorded for them; the store's files are then rewritten
so no deleted byte remains (``forgotten`` reports it).
"""

from __future__ import annotations

from typing import Literal, Self, get_args

from pydantic import AliasChoices, Field, model_validator

from react_mem.schema import Error
from react_mem.schema.base import MAX_REQUEST_VALUES, WireModel
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import MAX_VECTOR_DIMENSION, RetrievalOptions

#: Operations on the request's one scope (collection, user, conversation).
ScopedFactOperation = Literal[
    "store",
    "retrieve",
    "get",
    "history",
    "list",
    "sorted",
    "update",
    "delete",
    "purge",
    "consolidate",
    "unconsolidate",
]
#: ``forget`` spans a user's collections.
FactOperation = Literal[ScopedFactOperation, "forget"]
FACT_OPERATIONS: tuple[FactOperation, ...] = get_args(FactOperation)
#: What ``sorted`` orders by.
FactSort = Literal["time", "importance", "access"]
FACT_SORTS: tuple[FactSort, ...] = get_args(FactSort)
#: Most facts one ``store`` may carry on the wire (refused when decoded); the service's
#: own ``max_batch`` (256 by default) is at most this.
MAX_FACT_BATCH = 1024


class FactInput(WireModel):
    """A fact to store, or the new version of one (``update``)."""

    content: str = ""
    #: 0..1; default: the service's default (``store``) or the old fact's (``update``).
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Expire this many seconds after storing; default: the service's ``default_ttl_seconds``
    #: (``store``) or the old fact's expiry (``update``).
    ttl_seconds: float | None = Field(default=None, gt=0)
    metadata: dict[str, str] = Field(default_factory=dict)
    #: Where the fact was learned; default: the request's ``conversation_id``.
    source_conversation: str | None = Field(default=None, max_length=256)
    #: When what it says happened or held (epoch seconds), when known: a question naming a
    #: time ("in May 2023") ranks facts of that time higher.
    valid_at: float | None = Field(default=None, ge=0)
    #: Text around the fact (the message or turn before it): its words are indexed for
    #: lexical search, so a question worded like its context finds it; never returned.
    context: str = Field(default="", max_length=4000)
    #: store: stored facts (ids) this one updates, as its writer judged (e.g. an LLM): the
    #: one valid later stays current, the other becomes its history. Besides these, the
    #: service supersedes by rule (``memory_services.facts.slots``).
    updates: list[str] = Field(default_factory=list, max_length=16)
    #: store: stored facts this one contradicts with nothing to tell which holds now: both
    #: stay current, each marked in ``conflicts_with``.
    contradicts: list[str] = Field(default_factory=list, max_length=16)


class Fact(WireModel):
    id: str = ""
    content: str = ""
    workspace: str = ""
    collection: str = ""
    user: str | None = None
    source_conversation: str | None = None
    #: Epoch seconds.
    created_at: float = 0.0
    updated_at: float = 0.0
    last_accessed: float | None = None
    access_count: int = 0
    importance: float = 0.0
    confidence: float = 0.0
    expires_at: float | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    #: SHA-256 of the normalised content.
    content_hash: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)
    #: When what it says happened or held (epoch seconds), if the store was told.
    valid_at: float | None = None
    #: A superseded fact: when it stopped holding (its successor's ``valid_at``, else when
    #: the successor was stored).
    valid_until: float | None = None
    #: Current facts that say otherwise about the same thing, with nothing to tell which
    #: is true now (both stay current; see ``memory_services.facts.changes``).
    conflicts_with: list[str] = Field(default_factory=list)
    #: Cosine similarity to the query (``retrieve`` only).
    score: float | None = None
    #: Other conversations the fact was learned in (merged in by ``consolidate``).
    sources: list[str] = Field(default_factory=list)
    #: Other wordings of the fact that ``store`` merged into it as near-duplicates (texts
    #: that differ only in case, punctuation, inflection or filler words), oldest first.
    aliases: list[str] = Field(default_factory=list)
    #: The facts ``consolidate`` merged into this one.
    consolidated_from: list[str] = Field(default_factory=list)
    #: The fact this one was merged into (it is history until ``unconsolidate``).
    consolidated_into: str | None = None
    #: The pass that merged this fact into another, or (a survivor) the latest pass that
    #: merged others into it.
    consolidation_id: str | None = None


class StoredFact(WireModel):
    """What happened to one input of ``store`` (in input order) or ``update``."""

    id: str = ""
    #: ``added``: a new record; ``reinforced``: an existing fact with the same normalised
    #: content or a near-duplicate (``similarity`` >= the threshold, and the same fact by
    #: :mod:`memory_services.dedup_guard`; its wording joins ``aliases``) was reinforced instead;
    #: ``superseded``: the content is an old version of an updated fact (nothing written;
    #: ``update`` the current version to change it back).
    status: str = ""
    similarity: float | None = None
    #: Stored facts this one updated (they became its history); its own id when it was
    #: told after a later value (it is history at once).
    superseded: list[str] = Field(default_factory=list)
    #: Stored facts it contradicts with nothing to tell which is current (both kept).
    conflicts_with: list[str] = Field(default_factory=list)


class FactRequest(WireModel):
    max_values = MAX_REQUEST_VALUES
    #: Required: a missing or unknown one is refused (``bad-operation``) when decoded.
    operation: FactOperation
    collection: str = "default"
    user: str | None = None
    conversation_id: str | None = None
    #: store: the facts (one or a batch; a bad item rejects the whole batch).
    facts: list[FactInput] = Field(default_factory=list, max_length=MAX_FACT_BATCH)
    #: update: the new version of fact ``fact_id``.
    fact: FactInput | None = None
    #: update, history: the fact acted on.
    fact_id: str | None = None
    #: get, delete.
    ids: list[str] = Field(default_factory=list)
    #: retrieve: by ``query`` text, by ``vector``, or both (``vector`` then is the query's
    #: embedding, so the service embeds nothing; ``query`` gives the words hybrid ranks by).
    query: str | None = None
    vector: list[float] | None = Field(default=None, max_length=MAX_VECTOR_DIMENSION)
    top_k: int = Field(default=5, ge=1)
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    #: retrieve by query: dense, lexical or hybrid ranking (default: the service's, hybrid).
    retrieval: RetrievalOptions | None = None
    #: list: page size and the ``next_offset`` of the previous page (also accepted under
    #: its former name, ``cursor``).
    limit: int = Field(default=50, ge=1)
    offset: str | None = Field(default=None, validation_alias=AliasChoices("offset", "cursor"))
    #: sorted: the order (required); highest first unless ``ascending``.
    sort_by: FactSort | None = None
    ascending: bool = False
    #: consolidate: names the pass (default: the request's id); unconsolidate: the pass.
    consolidation_id: str | None = None
    #: consolidate: defaults from the service's settings (0.85 and 0.7).
    similarity_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    importance_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    #: Only memories below this merge into another (default: the service's, 0.5).
    min_importance: float | None = Field(default=None, gt=0.0, le=1.0)
    #: consolidate: report what would merge, change nothing.
    dry_run: bool = False
    #: store: at the user's quota, evict what the retention rule gives up first rather than
    #: refuse (never a fact more important than the most important one stored; never at
    #: the collection's quota). See :mod:`memory_services.facts.quota`.
    evict: bool = False
    #: store: the facts are consecutive parts of one conversation or text, in order (the
    #: turns of a session): each keeps its place, and a hybrid search lifts the neighbours of
    #: its hits (see :mod:`memory_services.store.ties`).
    sequence: bool = False


class FactResponse(WireModel):
    compact = True  # a search's reply: see ``WireModel.compact``
    error: Error | None = None
    #: retrieve (by score, best first), get, history (oldest first), list, sorted.
    facts: list[Fact] = Field(default_factory=list)
    #: store, update.
    stored: list[StoredFact] = Field(default_factory=list)
    #: get: requested ids not found in scope (or expired).
    missing: list[str] = Field(default_factory=list)
    #: list, sorted: pass as ``offset`` for the next page; null on the last page.
    next_offset: str | None = None
    #: sorted: the owner's current facts in the scope, all pages together.
    total: int | None = None
    #: delete, purge: how many records were removed.
    deleted: int = 0
    #: consolidate, unconsolidate.
    consolidation: ConsolidationReport | None = None
    #: store with ``evict``: the facts deleted to make room, in the order given up.
    evicted: list[str] = Field(default_factory=list)
    #: forget: what was removed, per kind, and the collections compacted.
    forgotten: Forgotten | None = None
    #: ``next_offset`` under its former name, for clients written against it.
    next_cursor: str | None = None

    @model_validator(mode="after")
    def _same_next_page(self) -> Self:
        self.next_offset = self.next_offset or self.next_cursor
        self.next_cursor = self.next_offset
        return self
