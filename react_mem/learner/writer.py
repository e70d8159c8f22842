"""The learner's writes to the memory services. Each is idempotent on its own (fact ids
derive from scope and content, episodes from the session, the summary is set, not
appended, a playbook delta carries its id).

An error reply is typed by its ``Error.type``: a service's own failure
(``processing-failed``) raises :class:`MemoryWriteFailed`, so the record is redelivered
rather than lost; anything else (invalid, ``quota-exceeded``, ...) is the service's final
word on that write and raises :class:`MemoryRefused`, which is recorded, never retried.
Each write returns whether it sent anything."""

from __future__ import annotations

import logging
from typing import Any

from react_mem.errors import BadRequest, TransientError
from react_mem.learner.ace import PLAYBOOK_MEMORY
from react_mem.learner.metrics import LearnerMetrics
from react_mem.learner.planner import Plan
from react_mem.processor.flow import Flow
from react_mem.schema import Error, WireModel
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.episodes import EpisodeResponse
from react_mem.schema.facts import FactRequest, FactResponse
from react_mem.schema.playbook import PlaybookRequest, PlaybookResponse
from react_mem.schema.scope import Scope

logger = logging.getLogger(__name__)

FACT_MEMORY = "fact-memory-request"
EPISODE_MEMORY = "episode-memory-request"
CONVERSATION_MEMORY = "conversation-memory-request"


#: Error types worth asking again: the service failed, not the request.
RETRYABLE = frozenset({"processing-failed"})
#: Facts the user asked to be remembered (see :mod:`.explicit`): worth evicting for.
EXPLICIT = "explicit-request"


class MemoryWriteFailed(TransientError):
    """A memory service failed to serve a write; the record is retried."""

    def __init__(self, service: str, error: Error) -> None:
        super().__init__(f"{service}: {error.type}: {error.message}")
        self.service, self.type = service, error.type


class MemoryRefused(BadRequest):
    """A memory service refused a write for good (``type``: its ``Error.type``)."""

    def __init__(self, service: str, error: Error) -> None:
        super().__init__(f"{service}: {error.type}: {error.message}", type=error.type)
        self.service = service


def raise_for(service: str, error: Error | None) -> None:
    """Nothing for no error; else the typed exception for ``error``."""
    if error is None:
        return
    if error.type in RETRYABLE:
        raise MemoryWriteFailed(service, error)
    raise MemoryRefused(service, error)


class Writer:
    def __init__(self, flow: Flow, metrics: LearnerMetrics) -> None:
        self._flow, self._metrics = flow, metrics

    async def current_summary(self, to: Scope) -> str | None:
        """The conversation's rolling summary; None without a (known) conversation."""
        if not to.conversation:
            return None
        response: ConversationResponse = await self._ask(
            CONVERSATION_MEMORY, ConversationRequest(operation="get", limit=1, **_scope(to))
        )
        return None if response.conversation is None else response.conversation.summary

    async def summary(self, to: Scope, plan: Plan, *, fresh: str | None = None) -> bool:
        """``fresh``: the summary the plan was just made from (under the conversation's
        lock), so it need not be read again; a redelivered plan reads it again."""
        if plan.summary is None:
            return False
        current = fresh if fresh is not None else await self.current_summary(to)
        if current is None:
            logger.warning("conversation %s is gone; summary not written", to.conversation)
        elif current.strip() == plan.summary.strip():
            self._metrics.duplicate("summary")
        elif current.strip() != plan.previous_summary.strip():
            # Moved on since this plan was made: ours landed and a later turn merged it.
            self._metrics.duplicate("summary")
        else:
            request = ConversationRequest(operation="update-summary", summary=plan.summary)
            await self._ask(CONVERSATION_MEMORY, request.model_copy(update=_scope(to)))
            self._metrics.learned("summary")
        return True

    async def facts(self, to: Scope, plan: Plan) -> bool:
        """At the user's quota, a batch holding a fact the user asked to be remembered
        evicts by the service's retention rule (see ``FactRequest.evict``); others are
        refused there."""
        if not plan.facts:
            return False
        evict = any(f.metadata.get("extracted-by") == EXPLICIT for f in plan.facts)
        request = FactRequest(operation="store", facts=plan.facts, evict=evict, **_scope(to))
        response: FactResponse = await self._ask(FACT_MEMORY, request)
        added = sum(1 for s in response.stored if s.status == "added")
        self._metrics.learned("fact", added)
        self._metrics.duplicate("fact", len(response.stored) - added)
        if response.evicted:
            self._metrics.evicted("fact", len(response.evicted))
            logger.warning(
                "fact-memory evicted %s at the quota of user %r in collection %r to store "
                "a fact the user asked to be remembered",
                ", ".join(response.evicted),
                to.user,
                to.collection,
            )
        return True

    async def episode(self, to: Scope, plan: Plan) -> bool:
        if plan.episode is None:
            return False
        request = plan.episode.model_copy(update=_scope(to))
        response: EpisodeResponse = await self._ask(EPISODE_MEMORY, request)
        if response.created:
            self._metrics.learned("episode")
        else:
            self._metrics.duplicate("episode")
        return True

    async def playbook(self, to: Scope, plan: Plan) -> bool:
        """Apply the plan's delta in its playbook scope (the trajectory's, not ``to``'s)."""
        ace = plan.ace
        if ace is None or not ace.delta.operations:
            return False
        if not self._flow.has_client(PLAYBOOK_MEMORY):
            logger.warning(
                "delta %s not applied: the flow has no playbook-memory", ace.delta.delta_id
            )
            return False
        request = PlaybookRequest(
            operation="apply-delta",
            collection=ace.collection,
            context_scope_id=ace.context_scope_id,
            user=ace.user,
            delta=ace.delta,
        )
        response: PlaybookResponse = await self._ask(PLAYBOOK_MEMORY, request)
        if response.applied is False:
            self._metrics.duplicate("delta")
            return True
        self._metrics.learned("delta")
        added = sum(1 for c in response.changes if c.change == "added")
        self._metrics.learned("bullet", added)
        logger.info(
            "delta %s applied (version %s): %s",
            ace.delta.delta_id,
            response.version,
            ", ".join(f"{c.change} {c.bullet_id}" for c in response.changes) or "no changes",
        )
        return True

    async def _ask(self, client: str, request: WireModel) -> Any:
        response = await self._flow.client(client).request(request)
        raise_for(client, getattr(response, "error", None))
        return response


def _scope(to: Scope) -> dict[str, Any]:
    return {"collection": to.collection, "user": to.user, "conversation_id": to.conversation}
