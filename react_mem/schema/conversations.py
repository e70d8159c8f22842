"""conversation-memory messages.

One request shape for every operation (``operation`` says which). A conversation is
identified by collection + user + conversation_id in the flow's workspace: give the same
``user`` on every call for one conversation. A conversation id is not a credential: with
another user (or none) the same id names another, separate conversation.

- ``append``: query, answer, summary (this turn's), result, time, and ``turn_id`` or
  ``session_id`` (else the message's correlation id) naming the turn, so a redelivered
  append is the same turn -> ``turn``, ``created``.
  ``memory_used``: what the answer's prompt held (kind, id, score and tokens of each memory
  item; contents are not kept, the inspector reads them by id from their services).
- ``get``: the conversation, its turns in order (``limit``: only the last N) -> ``conversation``
  (None for an unknown conversation).
- ``update-summary``: ``summary`` becomes the rolling summary -> ``conversation``.
- ``end``: end it now and publish one :class:`ConversationEnded` -> ``conversation``.
- ``search``: turns whose query and answer resemble ``query`` (top_k, min_score), in the
  request's scope (a conversation, or every conversation of the request's owner: the user,
  or without one the collection's user-less conversations) -> ``turns``.
- ``list``: conversations (without turns), paged by ``limit``/``offset`` -> ``conversations``.
- ``delete``: one conversation, ``purge``: the request's scope -> ``count`` of records removed.
- ``notice``: leave ``notice`` (a :class:`QuotaNotice`: what a quota dropped or evicted of
  this user's memory, never its words) pending on the conversation; the next ``append``
  with ``take_notices`` takes them onto its turn (``turn.notices``), so the answer of that
  turn tells the user once. A repeated ``notice_id`` is kept once -> ``count`` of pending.
- ``forget``: every conversation of ``user`` (required) with its turns and summary, in
  ``collection`` or (``""``) every collection; the store's files are rewritten so no deleted
  byte remains -> ``forgotten``.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from react_mem.schema import Error, WireModel
from react_mem.schema.agent import MemoryRef
from react_mem.schema.base import MAX_REQUEST_VALUES
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import RetrievalOptions

#: How an invocation went (the agent's own verdict), as episode outcomes are spelled.
Result = Literal["success", "failure", "partial"]
EndReason = Literal["explicit", "idle"]
#: Operations on the request's one scope (collection, user, conversation).
ScopedConversationOperation = Literal[
    "append",
    "get",
    "update-summary",
    "end",
    "search",
    "list",
    "delete",
    "purge",
    "notice",
]
#: ``forget`` spans a user's collections.
ConversationOperation = Literal[ScopedConversationOperation, "forget"]
OPERATIONS: tuple[ConversationOperation, ...] = get_args(ConversationOperation)


#: A notice's kind of memory and what its quota did to it.
NoticeKind = Literal["fact", "episode"]
NoticeAction = Literal["evicted", "refused"]


class QuotaNotice(WireModel):
    """What a quota did to a user's memory after an answer (the learner's writes), for the
    user's next answer in the conversation: the kind and how many, ids at most, no words."""

    #: Names the write that caused it: a redelivered notice is kept once.
    notice_id: str = Field(min_length=1, max_length=256)
    kind: NoticeKind
    action: NoticeAction
    count: int = Field(ge=1)
    #: The records evicted, when the service named them.
    ids: list[str] = Field(default_factory=list, max_length=64)


class ConversationTurn(WireModel):
    """One invocation record."""

    turn_id: str = ""
    #: 0, 1, 2, ... in the order turns were first appended.
    sequence: int = 0
    query: str = ""
    answer: str = ""
    summary: str = ""
    result: Result | None = None
    #: Epoch seconds (the request's ``time``, else when it was appended).
    time: float = 0.0
    session_id: str | None = None
    conversation_id: str = ""
    #: The memory items the answer's prompt held (no contents: see the module's ``append``).
    memory_used: list[MemoryRef] = Field(default_factory=list)
    #: The quota notices this turn's answer gave (taken from the conversation at append).
    notices: list[QuotaNotice] = Field(default_factory=list)
    #: Cosine similarity to the query (``search`` only).
    similarity: float | None = None


class Conversation(WireModel):
    conversation_id: str = ""
    collection: str = ""
    user: str | None = None
    summary: str = ""
    turns: list[ConversationTurn] = Field(default_factory=list)
    turn_count: int = 0
    created_at: float = 0.0
    last_activity: float = 0.0
    ended: bool = False
    ended_at: float | None = None
    end_reason: EndReason | None = None
    #: Quota notices waiting for the conversation's next answer to tell (a count).
    notices_pending: int = 0
    #: Turns it may still take before its cap (a ``get`` says; None where not said).
    turns_left: int | None = None


class ConversationRequest(WireModel):
    max_values = MAX_REQUEST_VALUES
    #: Required: a missing or unknown one is refused (``bad-operation``) when decoded.
    operation: ConversationOperation
    collection: str = "default"
    user: str | None = None
    conversation_id: str | None = None
    # append
    turn_id: str | None = None
    session_id: str | None = None
    query: str = ""
    answer: str = ""
    #: append: this turn's summary; update-summary: the new rolling summary.
    summary: str = ""
    result: Result | None = None
    time: float | None = Field(default=None, gt=0)
    #: append: the memory items in the answer's prompt (contents are dropped).
    memory_used: list[MemoryRef] = Field(default_factory=list, max_length=256)
    #: append: take the conversation's pending quota notices onto this turn (its answer
    #: states them). The agent sets it for an answer still to be sent, never after a reply.
    take_notices: bool = False
    # get (last N turns) / list (page size) / search (top_k)
    limit: int | None = Field(default=None, ge=1)
    offset: str | None = None
    top_k: int | None = Field(default=None, ge=1)
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    #: search: dense, lexical or hybrid ranking (default: the service's, hybrid).
    retrieval: RetrievalOptions | None = None
    #: search: turns brought either side of each hit, in its conversation (0: none).
    window: int = Field(default=0, ge=0, le=5)
    #: notice: what to tell the user at their next turn here.
    notice: QuotaNotice | None = None


class ConversationResponse(WireModel):
    error: Error | None = None
    conversation: Conversation | None = None
    turn: ConversationTurn | None = None
    #: append: False when the turn was already stored (a redelivery).
    created: bool | None = None
    turns: list[ConversationTurn] = Field(default_factory=list)
    conversations: list[Conversation] = Field(default_factory=list)
    next_offset: str | None = None
    count: int | None = None
    #: forget: what was removed, per kind, and the collections compacted.
    forgotten: Forgotten | None = None


class ConversationEnded(WireModel):
    """Published once per conversation end on ``flow:tg:conversation-ended:{ws}:{flow}``.

    Delivery is at least once: a crash between sending and recording the send repeats the
    event with the same ``event_id``, so consumers must be idempotent on it.
    """

    workspace: str = ""
    collection: str = ""
    user: str | None = None
    conversation_id: str = ""
    #: The conversation's turns in order (the oldest are left out if the event would be
    #: too large for the bus; ``omitted_turns`` says how many).
    turns: list[ConversationTurn] = Field(default_factory=list)
    summary: str = ""
    reason: EndReason = "explicit"
    ended_at: float = 0.0
    #: Same for every delivery of one end; a reopened conversation's next end has another.
    event_id: str = ""
    turn_count: int = 0
    omitted_turns: int = 0
