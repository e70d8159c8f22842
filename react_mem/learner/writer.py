"""The learner's writes to the memory services. Each is idempotent on its own (fact ids
derive from scope and content, episodes from the session, the summary is set, not
appended, a playbook delta carries its id); an error reply raises, so the record is
redelivered rather than lost."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memory_services.conversations.schema import ConversationRequest, ConversationResponse
from memory_services.episodes.schema import EpisodeResponse
from memory_services.facts.schema import FactRequest, FactResponse
from memory_services.playbook.schema import PlaybookRequest, PlaybookResponse
from react_mem.errors import TransientError
from react_mem.learner.ace import PLAYBOOK_MEMORY
from react_mem.learner.metrics import LearnerMetrics
from react_mem.learner.planner import Plan
from react_mem.processor.flow import Flow
from react_mem.schema import WireModel

logger = logging.getLogger(__name__)

FACT_MEMORY = "fact-memory-request"
EPISODE_MEMORY = "episode-memory-request"
CONVERSATION_MEMORY = "conversation-memory-request"


class MemoryWriteFailed(TransientError):
    """A memory service answered with an error; the record is retried."""


@dataclass(frozen=True)
class Target:
    """Where a record's memories go (the flow's workspace is implied)."""

    collection: str
    user: str | None
    conversation: str | None


class Writer:
    def __init__(self, flow: Flow, metrics: LearnerMetrics) -> None:
        self._flow, self._metrics = flow, metrics

    async def current_summary(self, to: Target) -> str | None:
        """The conversation's rolling summary; None without a (known) conversation."""
        if not to.conversation:
            return None
        response: ConversationResponse = await self._ask(
            CONVERSATION_MEMORY, ConversationRequest(operation="get", limit=1, **_scope(to))
        )
        return None if response.conversation is None else response.conversation.summary

    async def summary(self, to: Target, plan: Plan) -> None:
        if plan.summary is None:
            return
        current = await self.current_summary(to)
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

    async def facts(self, to: Target, plan: Plan) -> None:
        if not plan.facts:
            return
        response: FactResponse = await self._ask(
            FACT_MEMORY, FactRequest(operation="store", facts=plan.facts, **_scope(to))
        )
        added = sum(1 for s in response.stored if s.status == "added")
        self._metrics.learned("fact", added)
        self._metrics.duplicate("fact", len(response.stored) - added)

    async def episode(self, to: Target, plan: Plan) -> None:
        if plan.episode is None:
            return
        request = plan.episode.model_copy(update=_scope(to))
        response: EpisodeResponse = await self._ask(EPISODE_MEMORY, request)
        if response.created:
            self._metrics.learned("episode")
        else:
            self._metrics.duplicate("episode")

    async def playbook(self, to: Target, plan: Plan) -> None:
        """Apply the plan's delta in its playbook scope (the trajectory's, not ``to``'s)."""
        ace = plan.ace
        if ace is None or not ace.delta.operations:
            return
        if not self._flow.has_client(PLAYBOOK_MEMORY):
            logger.warning(
                "delta %s not applied: the flow has no playbook-memory", ace.delta.delta_id
            )
            return
        request = PlaybookRequest(
            operation="apply-delta",
            collection=ace.collection,
            context_scope_id=ace.context_scope_id,
            user=ace.user,
            delta=ace.delta,
        )
        response: PlaybookResponse = await self._flow.client(PLAYBOOK_MEMORY).request(request)
        error = response.error
        if error is not None and error.type != "processing-failed":
            # Rejected as invalid: asking again would be rejected again.
            logger.error("delta %s rejected: %s: %s", ace.delta.delta_id, error.type, error.message)
            self._metrics.rejected("delta")
            return
        if error is not None:
            raise MemoryWriteFailed(f"{PLAYBOOK_MEMORY}: {error.type}: {error.message}")
        if response.applied is False:
            self._metrics.duplicate("delta")
            return
        self._metrics.learned("delta")
        added = sum(1 for c in response.changes if c.change == "added")
        self._metrics.learned("bullet", added)
        logger.info(
            "delta %s applied (version %s): %s",
            ace.delta.delta_id,
            response.version,
            ", ".join(f"{c.change} {c.bullet_id}" for c in response.changes) or "no changes",
        )

    async def _ask(self, client: str, request: WireModel) -> Any:
        response = await self._flow.client(client).request(request)
        error = getattr(response, "error", None)
        if error is not None:
            raise MemoryWriteFailed(f"{client}: {error.type}: {error.message}")
        return response


def _scope(to: Target) -> dict[str, Any]:
    return {"collection": to.collection, "user": to.user, "conversation_id": to.conversation}
