"""The memory sources the agent recalls from at invocation start, declared once.

A source names its service (the flow's ``<service>-request`` client), its prompt section
(title, share of ``memory-token-budget``) and the ``agent-mem`` keys that size it, and says
how it is asked. The agent's client specs, its recall fan-out and the memory section's
layout all read ``SOURCES``: giving the agent a new memory kind is its service package
plus one ``MemorySource`` here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from react_mem.agent.config import AgentMemConfig
from react_mem.agent.items import (
    Item,
    bullet_items,
    conversation_items,
    episode_items,
    fact_items,
)
from react_mem.processor.flow import Flow
from react_mem.schema.base import WireModel
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactRequest, FactResponse
from react_mem.schema.playbook import PlaybookRequest, PlaybookResponse
from react_mem.schema.primitives import Error
from react_mem.schema.scope import Scope


@dataclass(frozen=True)
class Ask:
    """What one source is asked with."""

    flow: Flow
    cfg: AgentMemConfig
    question: str
    #: The question's embedding; ``None`` when the source does not embed or none was made.
    vector: list[float] | None
    scope: Scope
    #: The source's ``top_k`` and ``min_score`` settings (``0`` / ``None`` without a key).
    top_k: int = 0
    min_score: float | None = None


@dataclass(frozen=True)
class MemorySource:
    #: The prompt section, the key in ``Recall.items`` and the ``source`` metric label.
    name: str
    #: The memory service; the agent's client is ``<service>-request``/``-response``.
    service: str
    request: type[WireModel]
    response: type[WireModel]
    #: The section's title in the memory section of the prompt.
    title: str
    #: Share of the memory budget the section may use first; what one leaves, others take.
    share: float
    #: Asks the service; the answer as prompt items, best first.
    fetch: Callable[[Ask], Awaitable[list[Item]]]
    #: ``agent-mem`` key of how many records to recall; ``0`` turns the source off. A
    #: source without one is asked whenever its ``needs`` hold and is never "missed".
    top_k: str | None = None
    #: ``agent-mem`` key of the lowest similarity recalled.
    min_score: str | None = None
    #: Whether it is asked by the question's embedding (else at once, unembedded).
    embeds: Callable[[AgentMemConfig], bool] = lambda cfg: False
    #: Whether this request can be asked at all (a conversation needs its id).
    needs: Callable[[Scope], bool] = lambda scope: True
    #: ``agent-mem`` key of a share taken before the others (which scale down to the rest).
    share_key: str | None = None

    @property
    def client(self) -> str:
        return f"{self.service}-request"

    def ask(self, flow: Flow, cfg: AgentMemConfig, question: str, scope: Scope) -> Ask | None:
        """The question for this source, or ``None`` when it is not asked."""
        top_k = int(setting(cfg, self.top_k)) if self.top_k else 0
        if (self.top_k and top_k <= 0) or not self.needs(scope):
            return None
        if not flow.has_client(self.client):
            return None
        min_score = float(setting(cfg, self.min_score)) if self.min_score else None
        return Ask(flow, cfg, question, None, scope, top_k, min_score)


class _Reply(Protocol):
    error: Error | None


R = TypeVar("R", bound=_Reply)


def setting(cfg: AgentMemConfig, key: str) -> Any:
    """The value of ``agent-mem`` key ``key`` (hyphenated, as the config map spells it)."""
    for name, info in AgentMemConfig.model_fields.items():
        if info.alias == key:
            return getattr(cfg, name)
    raise KeyError(f"no {key!r} in agent-mem config")


def _answer(response: R) -> R:
    if response.error is not None:
        raise RuntimeError(response.error.message)
    return response


async def _facts(ask: Ask) -> list[Item]:
    request = FactRequest(
        operation="retrieve",
        collection=ask.scope.collection,
        user=ask.scope.user,
        top_k=ask.top_k,
        min_score=ask.min_score,
        vector=ask.vector,
        query=ask.question,  # also beside the vector: hybrid ranking reads its words
        retrieval=ask.cfg.retrieval(),
    )
    response: FactResponse = _answer(await ask.flow.client(FACTS.client).request(request))
    return fact_items(response.facts)


async def _episodes(ask: Ask) -> list[Item]:
    request = EpisodeRequest(
        operation="retrieve",
        collection=ask.scope.collection,
        user=ask.scope.user,
        top_k=ask.top_k,
        min_score=ask.min_score,
        vector=ask.vector,
        goal=ask.question,  # also beside the vector: hybrid ranking reads its words
        retrieval=ask.cfg.retrieval(),
    )
    response: EpisodeResponse = _answer(await ask.flow.client(EPISODES.client).request(request))
    return episode_items(response.episodes)


async def _playbook(ask: Ask) -> list[Item]:
    cfg = ask.cfg
    request = PlaybookRequest(
        operation="retrieve",
        collection=ask.scope.collection,
        context_scope_id=cfg.playbook_context_scope,
        user=ask.scope.user,
        query=ask.question,  # also when a vector is given: Jaccard relevance needs the text
        vector=ask.vector,
        top_k=ask.top_k,
        relevance=cfg.playbook_relevance,
        weights=cfg.playbook_weights,
    )
    response: PlaybookResponse = _answer(await ask.flow.client(PLAYBOOK.client).request(request))
    return bullet_items(response.bullets)


async def _conversation(ask: Ask) -> list[Item]:
    turns = ask.cfg.conversation_turns
    request = ConversationRequest(
        operation="get",
        collection=ask.scope.collection,
        user=ask.scope.user,
        conversation_id=ask.scope.conversation or "",
        limit=max(turns, 1),
    )
    client = ask.flow.client(CONVERSATIONS.client)
    response: ConversationResponse = _answer(await client.request(request))
    return conversation_items(response.conversation, turns)


PLAYBOOK = MemorySource(
    name="playbook",
    service="playbook-memory",
    request=PlaybookRequest,
    response=PlaybookResponse,
    title="Playbook (strategies learned from past tasks):",
    share=0.25,
    share_key="playbook-token-share",
    fetch=_playbook,
    top_k="playbook-top-k",
    embeds=lambda cfg: cfg.playbook_relevance == "embedding",
)
FACTS = MemorySource(
    name="facts",
    service="fact-memory",
    request=FactRequest,
    response=FactResponse,
    title="Long-term Facts:",
    share=0.4,
    fetch=_facts,
    top_k="fact-retrieval-top-k",
    min_score="fact-min-score",
    embeds=lambda cfg: True,
)
EPISODES = MemorySource(
    name="episodes",
    service="episode-memory",
    request=EpisodeRequest,
    response=EpisodeResponse,
    title="Relevant Past Episodes:",
    share=0.25,
    fetch=_episodes,
    top_k="episode-retrieval-top-k",
    min_score="episode-min-score",
    embeds=lambda cfg: True,
)
CONVERSATIONS = MemorySource(
    name="conversation",
    service="conversation-memory",
    request=ConversationRequest,
    response=ConversationResponse,
    title="Conversation History:",
    share=0.35,
    fetch=_conversation,
    needs=lambda scope: scope.conversation is not None,
)

#: Every source, in the order of their sections in the prompt.
SOURCES: tuple[MemorySource, ...] = (PLAYBOOK, FACTS, EPISODES, CONVERSATIONS)
