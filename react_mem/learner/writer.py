"""The learner's writes to the memory services. Each is idempotent on its own (fact ids
derive from scope and content, episodes from the session, the summary is set, not
appended, a playbook delta carries its id).

The clients type an error reply: a service's own failure (``processing-failed``) raises
:class:`~react_mem.errors.ServiceFailed`, a :class:`TransientError`, so the record is
redelivered rather than lost; anything else (invalid, ``quota-exceeded``, ...) is the
service's final word on that write and raises :class:`~react_mem.errors.ServiceRefused`,
which is recorded, never retried. Each write returns whether it sent anything."""

from __future__ import annotations

import dataclasses
import logging

from react_mem.clients.base import owner
from react_mem.clients.conversations import ConversationClient
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.facts import FactClient
from react_mem.clients.playbook import PlaybookClient, PlaybookRef
from react_mem.errors import ServiceRefused
from react_mem.learner.metrics import LearnerMetrics
from react_mem.learner.notices import leave_notice
from react_mem.learner.planner import Plan
from react_mem.processor.flow import Flow
from react_mem.schema.conversations import NoticeAction, NoticeKind
from react_mem.schema.facts import Fact, FactInput
from react_mem.schema.scope import Scope

logger = logging.getLogger(__name__)

#: Facts the user asked to be remembered (see :mod:`.explicit`): worth evicting for.
EXPLICIT = "explicit-request"


class Writer:
    def __init__(self, flow: Flow, metrics: LearnerMetrics) -> None:
        self._flow, self._metrics = flow, metrics

    async def current_summary(self, to: Scope) -> str | None:
        """The conversation's rolling summary; None without a (known) conversation."""
        if not to.conversation:
            return None
        conversation = await ConversationClient.of(self._flow).get(to, limit=1)
        return None if conversation is None else conversation.summary

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
            await ConversationClient.of(self._flow).update_summary(to, plan.summary)
            self._metrics.learned("summary")
        return True

    async def similar(self, to: Scope, facts: list[FactInput], top_k: int) -> list[list[Fact]]:
        """Each fact's most similar current facts of the same owner (every conversation)."""
        client, owner = FactClient.of(self._flow), dataclasses.replace(to, conversation=None)
        return [await client.retrieve(owner, fact.content, top_k=top_k) for fact in facts]

    async def facts(self, to: Scope, plan: Plan) -> bool:
        """At the user's quota, a batch holding a fact the user asked to be remembered
        evicts by the service's retention rule (see ``FactRequest.evict``); others are
        refused there. Either way the user's conversation gets a notice (:mod:`.notices`)."""
        if not plan.facts:
            return False
        evict = any(f.metadata.get("extracted-by") == EXPLICIT for f in plan.facts)
        # The learner run that plans these facts names the write (a redelivery's is the same).
        run = str(plan.facts[0].metadata.get("learner-run", ""))
        try:
            response = await FactClient.of(self._flow).store(to, plan.facts, evict=evict)
        except ServiceRefused as exc:
            if exc.type == "quota-exceeded":
                await self._notice(to, f"{run}:facts:refused", "fact", "refused", len(plan.facts))
            raise
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
            evicted = list(response.evicted)
            await self._notice(
                to, f"{run}:facts:evicted", "fact", "evicted", len(evicted), ids=evicted
            )
        return True

    async def episode(self, to: Scope, plan: Plan) -> bool:
        if plan.episode is None:
            return False
        episode = plan.episode.model_copy(update=owner(to))
        stored = await EpisodeClient.of(self._flow).store_request(episode)
        if stored.created:
            self._metrics.learned("episode")
        else:
            self._metrics.duplicate("episode")
        if stored.evicted:
            self._metrics.evicted("episode", stored.evicted)
            logger.warning(
                "episode-memory evicted %d older episode(s) of user %r in collection %r at "
                "its per-user cap",
                stored.evicted,
                to.user,
                to.collection,
            )
            notice_id = f"episode:{episode.session_id or to.conversation}:evicted"
            await self._notice(to, notice_id, "episode", "evicted", stored.evicted)
        return True

    async def _notice(
        self,
        to: Scope,
        notice_id: str,
        kind: NoticeKind,
        action: NoticeAction,
        count: int,
        *,
        ids: list[str] | None = None,
    ) -> None:
        await leave_notice(
            self._flow,
            self._metrics,
            to,
            notice_id=notice_id,
            kind=kind,
            action=action,
            count=count,
            ids=ids,
        )

    async def playbook(self, to: Scope, plan: Plan) -> bool:
        """Apply the plan's delta in its playbook scope (the trajectory's, not ``to``'s)."""
        ace = plan.ace
        if ace is None or not ace.delta.operations:
            return False
        if not PlaybookClient.available(self._flow):
            logger.warning(
                "delta %s not applied: the flow has no playbook-memory", ace.delta.delta_id
            )
            return False
        which = PlaybookRef(collection=ace.collection, context=ace.context_scope_id, user=ace.user)
        response = await PlaybookClient.of(self._flow).apply_delta(which, ace.delta)
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
