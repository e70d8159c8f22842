"""Forgetting a user: what a ``forget`` operation removed, and the learner's forget queue.

Every memory service answers ``forget`` (``user`` required; ``collection`` one collection,
or ``""`` for every collection of the flow's workspace) with a :class:`Forgotten` report.
The learner consumes :class:`ForgetRequest` on the persistent
``flow:tg:memory-forget:{workspace}:{flow}`` queue (a forget sent while it is down waits
there) and answers with a :class:`ForgetResponse` on ``response:tg:memory-forget:…``.
"""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel
from react_mem.schema.primitives import Error

#: The learner's forget interface (a flow's ``memory-forget`` request/response pair).
MEMORY_FORGET = "memory-forget"


class Forgotten(WireModel):
    """What one service removed for a user."""

    #: The collections the user's records were looked for in.
    collections: list[str] = Field(default_factory=list)
    #: Records removed, by kind (e.g. ``facts`` with their history, ``consolidations``).
    records: dict[str, int] = Field(default_factory=dict)
    #: Store collections rewritten so that deleted records leave no bytes on disk.
    compacted: list[str] = Field(default_factory=list)


class ForgetRequest(WireModel):
    user: str = ""
    #: One collection, or ``""``: every collection.
    collection: str = ""


class ForgetResponse(WireModel):
    error: Error | None = None
    forgotten: Forgotten | None = None
