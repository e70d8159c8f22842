"""playbook-memory messages (ACE: seeds 000, 001, 003).

A playbook is scoped by the flow's workspace + ``collection`` + ``context_scope_id``
(seed 001's context scopes: bullets of one context are never retrieved in another; ""
is the shared default context) + its owner. Each user has a private playbook (what their
own trajectories taught, seen by no one else); the collection-wide one holds seeds,
promoted lessons and what user-less requests learn, and every user of the collection reads
it. An owner shares their playbook with named users as ``viewer`` or ``editor`` (seed 002's
relations; :mod:`.access`). ``user`` on a request is who asks; on a bullet, who wrote it.

Which playbook an operation acts on: the requester's own (for a request without a user,
the collection-wide one), or the one ``playbook_owner`` names, or with ``collection_wide``
the collection's. ``retrieve``, ``get`` and ``list`` without either read every playbook
the requester may read (collection-wide, own, shared with them). A playbook the requester
has no relation to answers ``not-found``.

Operations (``operation``):

- ``retrieve``: ``query`` text (or ``vector``), ``top_k``, optional ``topic`` and ``user``
  boosts, ``relevance`` (``embedding`` | ``jaccard`` | ``hybrid``), ``weights`` (a preset name or
  explicit weights); advances the scope's access clock (unless ``advance_clock`` is false)
  and refreshes the returned bullets' access indexes -> ``bullets`` with scores.
- ``apply-delta``: ``delta`` -> ``version``, ``applied`` (false: this ``delta_id`` was
  applied before; nothing changed), ``changes``. Atomic per scope; grow-and-refine runs after.
- ``get`` (``ids``), ``list`` (``limit``, ``offset``, optional ``section``) -> ``bullets``.
- ``history`` (``limit``) -> ``history`` (newest first); ``show`` (``version``) -> the
  ``bullets`` as they were at that version; ``rollback`` (``version``) -> a new version
  whose bullets equal those of ``version``.
- ``stats`` -> ``count``, ``version``, ``clock``.
- ``grant`` (``relation``: ``viewer`` | ``editor``, ``grantees``) and ``revoke``
  (``grantees``): the owner shares their playbook, or stops sharing it; ``grants``: the
  owner (only) lists the grants in force on it -> ``grants`` (by user).
- ``share`` (``ids``): an editor of the collection-wide playbook (a request without a user,
  or a user granted ``editor`` on it) moves bullets of a playbook they may edit into it
  (screened for personal data again).
- ``delete`` (``ids``): removes bullets the requester may edit, from the playbook and from
  every kept version and delta record -> ``removed``.
- ``purge``: the requester's own playbook of this context, with its versions, delta
  records and relations -> ``removed``.
- ``forget`` (``user`` required; ``collection`` "" for every collection): everything of the
  user: their playbooks in every context, their grants, and what they wrote into other
  playbooks (bullets, versions, delta records) -> ``removed``.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from react_mem.schema import Error, WireModel
from react_mem.schema.base import MAX_REQUEST_VALUES
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import MAX_VECTOR_DIMENSION

PlaybookOperation = Literal[
    "retrieve",
    "apply-delta",
    "get",
    "list",
    "history",
    "show",
    "rollback",
    "stats",
    "grant",
    "revoke",
    "grants",
    "share",
    "delete",
    "purge",
    "forget",
]
OPERATIONS: tuple[PlaybookOperation, ...] = get_args(PlaybookOperation)

MemoryType = Literal["semantic", "episodic", "procedural"]
#: How a retrieve ranks relevance: embeddings, word overlap, or both.
Relevance = Literal["embedding", "jaccard", "hybrid"]
DeltaType = Literal["ADD", "UPDATE", "TAG", "REMOVE"]
ChangeKind = Literal["added", "updated", "tagged", "removed", "merged", "pruned", "reinforced"]


class Bullet(WireModel):
    """A strategy bullet (seed 001's fields, with seed 003's section and neutral count)."""

    id: str = ""
    content: str = ""
    section: str = "general"
    tags: list[str] = Field(default_factory=list)
    helpful: int = 0
    harmful: int = 0
    neutral: int = 0
    #: Only the active memory type's strength is non-zero.
    memory_type: MemoryType = "semantic"
    semantic_strength: float = 0.0
    episodic_strength: float = 0.0
    procedural_strength: float = 0.0
    #: The scope's access clock when each component was last refreshed.
    semantic_access_index: int = 0
    episodic_access_index: int = 0
    procedural_access_index: int = 0
    topic: str = ""
    concept: str = ""
    user: str | None = None
    collection: str = ""
    context_scope_id: str = ""
    ttl_days: float | None = None
    #: SHA-256 of the normalised content.
    content_hash: str = ""
    #: Epoch seconds.
    created_at: float = 0.0
    updated_at: float = 0.0
    last_used: float | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    #: Seed 002's evidence-based confidence: helpful / (helpful + harmful) (0.5 without
    #: evidence) plus 0.01 per mark up to 0.2, at most 1; a retrieve multiplies it by the
    #: bullet's recency (its decay since last used). None: written before it was kept.
    confidence: float | None = None
    #: Other wordings merged into this bullet (a reinforcing ADD or grow-and-refine's merge
    #: of near-duplicates that differ only in case, punctuation, inflection or filler).
    aliases: list[str] = Field(default_factory=list)
    # retrieve only: the combined score and its parts.
    score: float | None = None
    relevance: float | None = None
    strength: float | None = None
    decay_score: float | None = None


class DeltaOperation(WireModel):
    """ADD (content, section, ...), UPDATE (bullet_id; new content and/or counts),
    TAG (bullet_id; helpful/harmful/neutral increments), REMOVE (bullet_id)."""

    type: DeltaType = "ADD"
    bullet_id: str | None = None
    content: str | None = None
    section: str | None = None
    tags: list[str] = Field(default_factory=list)
    memory_type: MemoryType | None = None
    topic: str | None = None
    concept: str | None = None
    user: str | None = None
    ttl_days: float | None = Field(default=None, gt=0)
    #: Counter increments (ADD: initial counts; TAG/UPDATE: added to the bullet's).
    helpful: int = Field(default=0, ge=0)
    harmful: int = Field(default=0, ge=0)
    neutral: int = Field(default=0, ge=0)
    metadata: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _counters_in_metadata(cls, data: Any) -> Any:
        """Seed 003 writes the counters under ``metadata`` (``{"helpful": 1}``, also as
        strings, ``"3"``): they become the operation's counters; a counter given both ways
        or not a whole number >= 0 is refused, naming the key."""
        if not isinstance(data, dict) or not isinstance(data.get("metadata"), dict):
            return data
        metadata = dict(data["metadata"])
        data = dict(data)
        for name in COUNTERS:
            if name not in metadata:
                continue
            value = _count(name, metadata.pop(name))
            if data.get(name) not in (None, 0, value):
                raise ValueError(
                    f"'{name}' is given both as a field ({data[name]!r}) and in metadata "
                    f"({value!r}); give it once"
                )
            data[name] = value
        data["metadata"] = metadata
        return data


#: The effectiveness counters (seed 003), which seed 003's JSON carries in ``metadata``.
COUNTERS = ("helpful", "harmful", "neutral")


def _count(name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    raise ValueError(f"metadata.{name} must be a whole number >= 0, not {value!r}")


#: Most operations one delta may carry on the wire (refused when decoded); the service's
#: own ``max_operations`` (256 by default) is at most this.
MAX_DELTA_OPERATIONS = 1024


class Delta(WireModel):
    #: Exactly once: a delta id seen before in the scope is not applied again.
    delta_id: str = ""
    operations: list[DeltaOperation] = Field(default_factory=list, max_length=MAX_DELTA_OPERATIONS)
    #: Where it came from (a trajectory id, "feedback:<session>", "cli", "seed").
    source: str = ""
    reason: str = ""
    #: The topic of the ADDs that name none (e.g. the trajectory's task type); without
    #: it an ADD's topic is its section unless that is the default one.
    topic: str | None = None


class BulletChange(WireModel):
    bullet_id: str = ""
    change: ChangeKind = "added"
    #: merged/reinforced: the surviving bullet.
    into: str | None = None


class DeltaRecord(WireModel):
    """One applied delta: the playbook's history, for show and rollback."""

    version: int = 0
    delta_id: str = ""
    source: str = ""
    reason: str = ""
    applied_at: float = 0.0
    #: Who applied it (None: the collection, or the service itself).
    user: str | None = None
    operations: list[DeltaOperation] = Field(default_factory=list)
    changes: list[BulletChange] = Field(default_factory=list)


class Weights(WireModel):
    relevance: float = Field(default=0.25, ge=0)
    strength: float = Field(default=0.55, ge=0)
    type: float = Field(default=0.20, ge=0)


class PlaybookRequest(WireModel):
    max_values = MAX_REQUEST_VALUES
    #: Required: a missing or unknown one is refused (``bad-operation``) when decoded.
    operation: PlaybookOperation
    collection: str = "default"
    context_scope_id: str = ""
    user: str | None = None
    # retrieve
    query: str | None = None
    vector: list[float] | None = Field(default=None, max_length=MAX_VECTOR_DIMENSION)
    top_k: int = Field(default=10, ge=1, le=200)
    topic: str | None = None
    #: hybrid: the mean of the embedding's cosine and the share of the query's terms
    #: (stemmed, IDF-weighted over the playbook) a bullet holds.
    relevance: Relevance = "embedding"
    #: A preset ("default", "relevance-dominant") or explicit weights.
    weights: str | Weights = "default"
    #: Bullets less relevant than this are left out (none: the service's floor).
    min_relevance: float | None = Field(default=None, ge=0.0, le=1.0)
    advance_clock: bool = True
    # apply-delta
    delta: Delta | None = None
    # get / list
    ids: list[str] = Field(default_factory=list)
    section: str | None = None
    limit: int = Field(default=50, ge=1, le=1000)
    offset: str | None = None
    # show / rollback
    version: int | None = Field(default=None, ge=0)
    #: The playbook acted on: another user's (shared with the requester), or with
    #: ``collection_wide`` the collection's; neither: the requester's own.
    playbook_owner: str | None = None
    collection_wide: bool = False
    # grant / revoke
    relation: Literal["viewer", "editor"] | None = None
    grantees: list[str] = Field(default_factory=list, max_length=100)


class Grant(WireModel):
    """A grant in force: ``user`` may read (``viewer``) or also change (``editor``) it."""

    user: str = ""
    relation: Literal["viewer", "editor"] = "viewer"


class PlaybookResponse(WireModel):
    compact = True  # a search's reply: see ``WireModel.compact``
    error: Error | None = None
    bullets: list[Bullet] = Field(default_factory=list)
    version: int | None = None
    applied: bool | None = None
    changes: list[BulletChange] = Field(default_factory=list)
    history: list[DeltaRecord] = Field(default_factory=list)
    next_offset: str | None = None
    count: int | None = None
    clock: int | None = None
    #: delete / purge / forget: records removed, by kind (bullets, versions, snapshots, ...).
    removed: dict[str, int] = Field(default_factory=dict)
    #: forget: the collections looked in, what was removed, the store files rewritten.
    collections: list[str] = Field(default_factory=list)
    forgotten: Forgotten | None = None
    #: grants: the playbook's grants in force, by user.
    grants: list[Grant] = Field(default_factory=list)


class RubricResult(WireModel):
    name: str = ""
    passed: bool = False
    comment: str = ""


class Feedback(WireModel):
    """User or evaluator feedback on one agent invocation, on the flow's ``feedback`` queue
    (``flow:tg:agent-feedback:{workspace}:{flow}``): it re-runs reflection for that
    trajectory and moves the counters of the bullets that were in its prompt."""

    feedback_id: str = ""
    session_id: str = ""
    collection: str = "default"
    user: str | None = None
    #: -1 (harmful) .. 1 (helpful); or use ``helpful``.
    rating: float | None = Field(default=None, ge=-1.0, le=1.0)
    helpful: bool | None = None
    rubric: list[RubricResult] = Field(default_factory=list)
    ground_truth: str | None = None
    comment: str = ""
