"""Quota notices: the learner's writes come after the answer, so when one evicts or is
refused at a quota, the user is told at their next answer in the same conversation. The
notice is left on that conversation (conversation-memory's ``notice``); the next append
takes it onto its turn and the agent's answer states it once (see docs/faults.md).

A notice says what kind of memory, what happened and how many, with ids at most: never
the user's words. It reaches only the owner's conversation (the write's own scope)."""

from __future__ import annotations

import logging

from react_mem.clients.conversations import CONVERSATION_MEMORY, ConversationClient
from react_mem.errors import ServiceRefused
from react_mem.learner.metrics import LearnerMetrics
from react_mem.processor.flow import Flow
from react_mem.schema.conversations import NoticeAction, NoticeKind, QuotaNotice
from react_mem.schema.scope import Scope

logger = logging.getLogger(__name__)

#: Ids a notice names at most (the rest are counted).
MAX_IDS = 16


async def leave_notice(
    flow: Flow,
    metrics: LearnerMetrics,
    to: Scope,
    *,
    notice_id: str,
    kind: NoticeKind,
    action: NoticeAction,
    count: int,
    ids: list[str] | None = None,
) -> None:
    """Leave the notice for ``to``'s conversation. ``notice_id`` names the write that
    caused it, so a redelivered write leaves it once. A transient failure is raised (the
    record is redelivered); a refusal is logged and counted, never retried."""
    if count < 1:
        return
    if not to.conversation or not flow.has_client(CONVERSATION_MEMORY.request):
        metrics.notice(kind, action, "no-conversation")
        logger.info("no conversation to tell of %d %s %s at a quota", count, kind, action)
        return
    notice = QuotaNotice(
        notice_id=notice_id[:256],
        kind=kind,
        action=action,
        count=count,
        ids=list(ids or [])[:MAX_IDS],
    )
    try:
        await ConversationClient.of(flow).notice(to, notice)
    except ServiceRefused as exc:
        metrics.notice(kind, action, "refused")
        logger.warning(
            "quota notice %s for conversation %s refused (%s)", notice_id, to.conversation, exc.type
        )
        return
    metrics.notice(kind, action, "left")
