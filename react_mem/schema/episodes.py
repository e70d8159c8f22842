"""episode-memory messages.

One request shape for every operation (``operation`` says which), as TrustGraph's services
have it; fields an operation does not use are ignored. The scope is the flow's workspace +
``collection`` + ``user`` (the owner: without a user, the collection's shared episodes,
never a user's; see :mod:`react_mem.schema.scope`), narrowed by ``conversation_id`` when it
is given: a store records them on the episode; a retrieve or list without
``conversation_id`` looks across every conversation of that owner.

- ``store``: goal, steps, outcome, score, lessons, tokens, duration_seconds, session_id
  (and the scope's ``conversation_id``) -> ``id``, ``created``, ``evicted``.
- ``retrieve``: goal and/or context (or a precomputed ``vector``), top_k, optional
  ``outcome``, ``task_type``, ``since`` / ``until`` filters, ``min_score`` -> ``episodes``
  with ``similarity``, best first. ``also``: further searches by the same query (goal,
  context or vector, ``min_score``, ``retrieval``), each with its own ``top_k`` and filters,
  answered in the response's ``also``, one list per search in their order: one request for
  what would be several (the agent's recent lessons beside its episodes). A service that
  predates ``also`` ignores it and answers none.
- ``get``: ids -> episodes. ``list``: limit, offset, the same optional filters -> a page of
  episodes and ``next_offset``. Episodes are the store of trajectories: each carries its
  task type, parent session, success score, cost (tokens, duration) and the playbook
  bullets that were shown and used (seeds 002/003). ``delete``: ids -> ``count``.
  ``purge``: the request's scope (collection, optionally narrowed by user and/or
  conversation_id) -> ``count``.
- ``consolidate``: merges clusters of near-duplicate episodes (cosine similarity of their
  stored vectors at or above ``similarity_threshold``) of one user and one outcome whose
  ``score`` -- an episode's importance -- is below ``importance_threshold``; episodes at or
  above it are never changed. Each cluster keeps its best episode (highest score, then most
  lessons, then the newest) with its id, goal, steps and vector, adds the others' lessons it
  lacks (up to the per-episode lesson limit) and lists them in ``consolidated_from``; the
  others become history (``consolidated_into`` the survivor): ``retrieve`` and ``list`` skip
  them, ``get`` still returns them. ``bytes_saved`` counts the episodes' JSON (goal, steps,
  outcome, score, lessons, tokens, duration, session). Optional ``consolidation_id`` (default:
  the request's id; a repeated request gets the first report), thresholds (default 0.85 and
  0.7 from the settings), ``dry_run`` -> ``consolidation``.
- ``unconsolidate``: ``consolidation_id`` -> ``consolidation``: the absorbed episodes live
  again and the survivor loses the lessons the merge added.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from react_mem.schema import AgentStep, Error, WireModel
from react_mem.schema.base import MAX_REQUEST_VALUES
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import MAX_VECTOR_DIMENSION, RetrievalOptions

Outcome = Literal["success", "failure", "partial"]
#: Operations on the request's one scope (collection, user, conversation).
ScopedEpisodeOperation = Literal[
    "store",
    "retrieve",
    "get",
    "list",
    "delete",
    "purge",
    "consolidate",
    "unconsolidate",
]
#: ``forget`` spans a user's collections.
EpisodeOperation = Literal[ScopedEpisodeOperation, "forget"]
OPERATIONS: tuple[EpisodeOperation, ...] = get_args(EpisodeOperation)
#: A task type or parent session id; the bullet ids one episode records.
MAX_LABEL_CHARS = 200
MAX_BULLETS = 200
#: Most steps one episode may carry on the wire (refused when decoded); the service's own
#: ``max_steps`` (200 by default) is at most this.
MAX_EPISODE_STEPS = 1000


class Episode(WireModel):
    """A stored episode as returned by the service."""

    id: str = ""
    goal: str = ""
    steps: list[AgentStep] = Field(default_factory=list)
    outcome: Outcome = "success"
    score: float = 0.0
    lessons: list[str] = Field(default_factory=list)
    tokens: int = 0
    duration_seconds: float = 0.0
    session_id: str | None = None
    conversation_id: str | None = None
    user: str | None = None
    collection: str = ""
    #: The trajectory's task type and the session that spawned it (seed 002).
    task_type: str = ""
    parent_session_id: str = ""
    #: Playbook bullet ids in the prompt, and those the agent said it relied on (seed 003).
    bullets_shown: list[str] = Field(default_factory=list)
    bullets_used: list[str] = Field(default_factory=list)
    #: Epoch seconds when first stored.
    created_at: float = 0.0
    #: Cosine similarity to the query (``retrieve`` only).
    similarity: float | None = None
    #: The episodes ``consolidate`` merged into this one.
    consolidated_from: list[str] = Field(default_factory=list)
    #: The episode this one was merged into (history until ``unconsolidate``).
    consolidated_into: str | None = None
    #: The pass that merged this episode into another, or (a survivor) the latest pass
    #: that merged others into it.
    consolidation_id: str | None = None


#: Most further searches one retrieve may carry (``also``).
MAX_ALSO_SEARCHES = 4


class EpisodeSearch(WireModel):
    """A further search by a retrieve's query, with its own size and filters (the
    request's fields of the same names, which it replaces for this search)."""

    top_k: int | None = Field(default=None, ge=1)
    outcome: Outcome | None = None
    task_type: str | None = Field(default=None, max_length=MAX_LABEL_CHARS)
    since: float | None = None
    until: float | None = None


class EpisodeHits(WireModel):
    """What one of a retrieve's ``also`` searches found, best first."""

    episodes: list[Episode] = Field(default_factory=list)


class EpisodeRequest(WireModel):
    max_values = MAX_REQUEST_VALUES
    #: Required: a missing or unknown one is refused (``bad-operation``) when decoded.
    operation: EpisodeOperation
    collection: str = "default"
    user: str | None = None
    conversation_id: str | None = None
    # store
    goal: str = ""
    steps: list[AgentStep] = Field(default_factory=list, max_length=MAX_EPISODE_STEPS)
    #: store: the episode's outcome (required); retrieve/list: only episodes with it.
    outcome: Outcome | None = None
    score: float = Field(default=0.0, ge=0.0, le=1.0)
    lessons: list[str] = Field(default_factory=list)
    tokens: int = Field(default=0, ge=0)
    duration_seconds: float = Field(default=0.0, ge=0.0)
    #: The agent session that produced the episode: a redelivered store with the same
    #: session in the same scope is the same episode.
    session_id: str | None = None
    #: store: the trajectory's task type; retrieve/list: only episodes of it.
    task_type: str | None = Field(default=None, max_length=MAX_LABEL_CHARS)
    parent_session_id: str | None = Field(default=None, max_length=MAX_LABEL_CHARS)
    bullets_shown: list[str] = Field(default_factory=list, max_length=MAX_BULLETS)
    bullets_used: list[str] = Field(default_factory=list, max_length=MAX_BULLETS)
    #: retrieve/list: only episodes stored at or after ``since`` and before ``until``
    #: (epoch seconds).
    since: float | None = None
    until: float | None = None
    # retrieve
    context: str = ""
    vector: list[float] | None = Field(default=None, max_length=MAX_VECTOR_DIMENSION)
    top_k: int | None = Field(default=None, ge=1)
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    #: retrieve by goal: dense, lexical or hybrid ranking (default: the service's, hybrid).
    retrieval: RetrievalOptions | None = None
    # get / delete
    ids: list[str] = Field(default_factory=list)
    # list
    limit: int = Field(default=20, ge=1)
    offset: str | None = None
    # consolidate / unconsolidate
    consolidation_id: str | None = None
    similarity_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    importance_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    #: Only memories below this merge into another (default: the service's, 0.5).
    min_importance: float | None = Field(default=None, gt=0.0, le=1.0)
    dry_run: bool = False
    #: retrieve: further searches by this query (see the module's doc).
    also: list[EpisodeSearch] = Field(default_factory=list, max_length=MAX_ALSO_SEARCHES)
    #: retrieve: False leaves each episode's ``steps`` out (the store reads none of them):
    #: the agent's recall shows a goal, an outcome and lessons. A service that predates
    #: the field answers with steps.
    with_steps: bool = True


class EpisodeResponse(WireModel):
    compact = True  # a search's reply: see ``WireModel.compact``
    error: Error | None = None
    #: store: the episode's id, and whether this request created it (False: already stored).
    id: str | None = None
    created: bool | None = None
    episodes: list[Episode] = Field(default_factory=list)
    next_offset: str | None = None
    #: delete/purge: how many records were removed.
    count: int | None = None
    #: store: older episodes evicted by the per-scope count limit.
    evicted: int | None = None
    #: consolidate, unconsolidate.
    consolidation: ConsolidationReport | None = None
    #: forget: what was removed, per kind, and the collections compacted.
    forgotten: Forgotten | None = None
    #: retrieve: each of the request's ``also`` searches' episodes, in its order.
    also: list[EpisodeHits] = Field(default_factory=list)
