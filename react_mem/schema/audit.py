"""Audit events: who removed, exported or shared what memory, where and when.

A memory service emits one :class:`AuditEvent` after each successful audited operation
(delete, purge, forget, export, playbook grants) on the flow's persistent
``flow:tg:memory-audit:{workspace}:{flow}`` queue, and logs it. An event names the owner
scope and counts records; it never holds memory contents or a user's words.
"""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel

#: The flow spec name (and topic) of the audit queue.
MEMORY_AUDIT = "memory-audit"


class AuditEvent(WireModel):
    #: Deterministic for a request id, so a redelivered request repeats the same event.
    event_id: str = ""
    #: Epoch seconds when the operation completed.
    time: float = 0.0
    #: The processor id that performed it (e.g. ``fact-memory``).
    processor: str = ""
    workspace: str = ""
    flow: str = ""
    #: The owner scope acted on ("" collection: every collection, as ``forget`` allows).
    collection: str | None = None
    user: str | None = None
    conversation_id: str | None = None
    operation: str = ""
    #: The users a grant or revoke names, and the relation granted.
    grantees: list[str] = Field(default_factory=list)
    relation: str | None = None
    #: What the reply counted (records removed, by kind); numbers only.
    counts: dict[str, int] = Field(default_factory=dict)
    #: The request's correlation id (message property ``id``).
    request_id: str | None = None
