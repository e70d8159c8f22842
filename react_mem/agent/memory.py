"""Invocation start: recall what memory holds for a question, in parallel, never failing.

The question is embedded once; fact and episode memory and the playbook are asked by that
vector and the conversation is loaded by id, all at once, each with its own timeout. A
memory service that is absent from the flow, slow or failing thins the context; it never
fails the answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from react_mem.agent.config import AgentMemConfig
from react_mem.embedding.base import Embedder
from react_mem.processor.flow import Flow
from react_mem.schema.conversations import (
    Conversation,
    ConversationRequest,
    ConversationResponse,
)
from react_mem.schema.episodes import Episode, EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import Fact, FactRequest, FactResponse
from react_mem.schema.playbook import Bullet, PlaybookRequest, PlaybookResponse
from react_mem.schema.scope import Scope

logger = logging.getLogger(__name__)

FACTS = "fact-memory-request"
EPISODES = "episode-memory-request"
CONVERSATIONS = "conversation-memory-request"
WORKING = "working-memory-request"
PLAYBOOK = "playbook-memory-request"

T = TypeVar("T")


@dataclass
class Recall:
    facts: list[Fact] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    conversation: Conversation | None = None
    #: Playbook bullets, best first.
    bullets: list[Bullet] = field(default_factory=list)
    #: Sources that could not be read this time (absent, late or failing), with why.
    missed: dict[str, str] = field(default_factory=dict)
    #: Seconds per source, the embedding included as ``embed``.
    timings: dict[str, float] = field(default_factory=dict)


class MemoryRecall:
    def __init__(self, flow: Flow, embedder: Embedder | None, config: AgentMemConfig) -> None:
        self.flow, self.embedder, self.config = flow, embedder, config

    async def recall(self, question: str, scope: Scope) -> Recall:
        cfg, flow, recall = self.config, self.flow, Recall()
        wants_facts = cfg.fact_retrieval_top_k > 0 and flow.has_client(FACTS)
        wants_episodes = cfg.episode_retrieval_top_k > 0 and flow.has_client(EPISODES)
        wants_bullets = cfg.playbook_top_k > 0 and flow.has_client(PLAYBOOK)
        by_vector = wants_bullets and cfg.playbook_relevance == "embedding"
        conversation = None
        if scope.conversation and flow.has_client(CONVERSATIONS):
            # Needs no vector: asked at once, while the question is embedded.
            conversation = asyncio.ensure_future(
                self._timed(recall, "conversation", self._conversation(scope))
            )
        vector = None
        if (wants_facts or wants_episodes or by_vector) and self.embedder is not None:
            vector = await self._timed(recall, "embed", self._embed(question))
        jobs: dict[str, Awaitable[Any]] = {}
        if wants_facts:
            jobs["facts"] = self._timed(recall, "facts", self._facts(question, vector, scope))
        if wants_episodes:
            jobs["episodes"] = self._timed(
                recall, "episodes", self._episodes(question, vector, scope)
            )
        if wants_bullets:
            jobs["bullets"] = self._timed(
                recall, "playbook", self._bullets(question, vector if by_vector else None, scope)
            )
        if conversation is not None:
            jobs["conversation"] = conversation
        results = await asyncio.gather(*jobs.values())
        for name, result in zip(jobs, results, strict=True):
            if result is not None:
                setattr(recall, name, result)
        wanted = (("facts", wants_facts), ("episodes", wants_episodes), ("playbook", wants_bullets))
        for name, present in wanted:
            if not present:
                recall.missed.setdefault(name, "not in this flow")
        return recall

    async def _timed(self, recall: Recall, name: str, job: Awaitable[T]) -> T | None:
        started = time.perf_counter()
        try:
            return await asyncio.wait_for(job, self.config.memory_timeout)
        except TimeoutError:
            recall.missed[name] = f"no answer within {self.config.memory_timeout}s"
        except Exception as exc:
            recall.missed[name] = f"{type(exc).__name__}: {exc}"
        finally:
            recall.timings[name] = time.perf_counter() - started
        logger.warning("memory %s left out of the context: %s", name, recall.missed[name])
        return None

    async def _embed(self, question: str) -> list[float]:
        assert self.embedder is not None
        return (await self.embedder.embed([question]))[0]

    async def _facts(self, question: str, vector: list[float] | None, scope: Scope) -> list[Fact]:
        request = FactRequest(
            operation="retrieve",
            collection=scope.collection,
            user=scope.user,
            top_k=self.config.fact_retrieval_top_k,
            min_score=self.config.fact_min_score,
            vector=vector,
            query=question if vector is None else None,
        )
        response: FactResponse = await self.flow.client(FACTS).request(request)
        if response.error is not None:
            raise RuntimeError(response.error.message)
        return response.facts

    async def _episodes(
        self, question: str, vector: list[float] | None, scope: Scope
    ) -> list[Episode]:
        request = EpisodeRequest(
            operation="retrieve",
            collection=scope.collection,
            user=scope.user,
            top_k=self.config.episode_retrieval_top_k,
            min_score=self.config.episode_min_score,
            vector=vector,
            goal=question if vector is None else "",
        )
        response: EpisodeResponse = await self.flow.client(EPISODES).request(request)
        if response.error is not None:
            raise RuntimeError(response.error.message)
        return response.episodes

    async def _bullets(
        self, question: str, vector: list[float] | None, scope: Scope
    ) -> list[Bullet]:
        cfg = self.config
        request = PlaybookRequest(
            operation="retrieve",
            collection=scope.collection,
            context_scope_id=cfg.playbook_context_scope,
            user=scope.user,
            query=question,  # also when a vector is given: Jaccard relevance needs the text
            vector=vector,
            top_k=cfg.playbook_top_k,
            relevance=cfg.playbook_relevance,
            weights=cfg.playbook_weights,
        )
        response: PlaybookResponse = await self.flow.client(PLAYBOOK).request(request)
        if response.error is not None:
            raise RuntimeError(response.error.message)
        return response.bullets

    async def _conversation(self, scope: Scope) -> Conversation | None:
        request = ConversationRequest(
            operation="get",
            collection=scope.collection,
            user=scope.user,
            conversation_id=scope.conversation or "",
            limit=max(self.config.conversation_turns, 1),
        )
        response: ConversationResponse = await self.flow.client(CONVERSATIONS).request(request)
        if response.error is not None:
            raise RuntimeError(response.error.message)
        return response.conversation
