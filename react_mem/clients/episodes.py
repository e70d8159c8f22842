"""The episode-memory client: one method per :data:`~react_mem.schema.episodes.OPERATIONS`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from react_mem.clients.base import Page, Service, build, owner
from react_mem.clients.consolidating import ConsolidatingClient
from react_mem.errors import BadReply
from react_mem.schema.agent import AgentStep
from react_mem.schema.episodes import (
    Episode,
    EpisodeRequest,
    EpisodeResponse,
    EpisodeSearch,
    Outcome,
)
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import RetrievalOptions
from react_mem.schema.scope import Scope

EPISODE_MEMORY: Service[EpisodeRequest, EpisodeResponse] = Service(
    "episode-memory", EpisodeRequest, EpisodeResponse
)


@dataclass(frozen=True, slots=True)
class Stored:
    id: str
    #: False: this session's episode was stored before (nothing changed).
    created: bool
    #: Episodes removed at the scope's limit to make room.
    evicted: int = 0


class EpisodeClient(ConsolidatingClient[EpisodeRequest, EpisodeResponse]):
    service = EPISODE_MEMORY

    async def store(
        self,
        scope: Scope,
        *,
        goal: str,
        steps: Sequence[AgentStep] = (),
        outcome: Outcome,
        score: float = 0.0,
        lessons: Sequence[str] = (),
        tokens: int = 0,
        duration_seconds: float = 0.0,
        session_id: str | None = None,
    ) -> Stored:
        request = build(
            EpisodeRequest,
            operation="store",
            goal=goal,
            steps=list(steps),
            outcome=outcome,
            score=score,
            lessons=list(lessons),
            tokens=tokens,
            duration_seconds=duration_seconds,
            session_id=session_id,
            **owner(scope),
        )
        return await self.store_request(request)

    async def store_request(self, request: EpisodeRequest) -> Stored:
        """Store an episode already shaped as a request (the learner plans them so)."""
        response = await self.call(request.model_copy(update={"operation": "store"}))
        if response.id is None:
            raise BadReply("episode-memory: store reply without an id", service="episode-memory")
        return Stored(response.id, bool(response.created), response.evicted or 0)

    async def retrieve(
        self,
        scope: Scope,
        *,
        goal: str = "",
        context: str = "",
        vector: Sequence[float] | None = None,
        top_k: int | None = None,
        outcome: Outcome | None = None,
        min_score: float | None = None,
        retrieval: RetrievalOptions | None = None,
        task_type: str | None = None,
        since: float | None = None,
        until: float | None = None,
        steps: bool = True,
    ) -> list[Episode]:
        """The episodes most similar to ``goal``/``context`` (or ``vector``), best first
        (without their steps if ``steps`` is False)."""
        search = build(
            EpisodeSearch,
            top_k=top_k,
            outcome=outcome,
            task_type=task_type,
            since=since,
            until=until,
        )
        [found] = await self.retrieve_each(
            scope,
            [search],
            goal=goal,
            context=context,
            vector=vector,
            min_score=min_score,
            retrieval=retrieval,
            steps=steps,
        )
        return found

    async def retrieve_each(
        self,
        scope: Scope,
        searches: Sequence[EpisodeSearch],
        *,
        goal: str = "",
        context: str = "",
        vector: Sequence[float] | None = None,
        min_score: float | None = None,
        retrieval: RetrievalOptions | None = None,
        steps: bool = True,
    ) -> list[list[Episode]]:
        """Each search's episodes (its size and filters, by one query), best first, in one
        request (the request's ``also``); ``steps`` False: without their steps (a service
        that predates ``with_steps`` sends them). A service that predates ``also`` answers
        the first alone: the others are then asked one by one."""
        first, *others = searches
        response = await self.call(
            build(
                EpisodeRequest,
                operation="retrieve",
                goal=goal,
                context=context,
                vector=None if vector is None else list(vector),
                min_score=min_score,
                retrieval=retrieval,
                also=list(others),
                with_steps=steps,
                **first.model_dump(),
                **owner(scope),
            )
        )
        found = [response.episodes]
        if len(response.also) == len(others):
            return found + [hits.episodes for hits in response.also]
        for search in others:  # an older service: one request a search
            found += await self.retrieve_each(
                scope,
                [search],
                goal=goal,
                context=context,
                vector=vector,
                min_score=min_score,
                retrieval=retrieval,
                steps=steps,
            )
        return found

    async def get(self, scope: Scope, ids: Sequence[str]) -> list[Episode]:
        response = await self.call(
            build(EpisodeRequest, operation="get", ids=list(ids), **owner(scope))
        )
        return response.episodes

    async def page(
        self,
        scope: Scope,
        *,
        limit: int = 20,
        offset: str | None = None,
        outcome: Outcome | None = None,
        task_type: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> Page[Episode]:
        """A page of the owner's episodes (trajectories), narrowed by outcome, task type
        and the time they were stored."""
        response = await self.call(
            build(
                EpisodeRequest,
                operation="list",
                limit=limit,
                offset=offset,
                outcome=outcome,
                task_type=task_type,
                since=since,
                until=until,
                **owner(scope),
            )
        )
        return Page(response.episodes, response.next_offset)

    async def delete(self, scope: Scope, ids: Sequence[str]) -> int:
        response = await self.call(
            build(EpisodeRequest, operation="delete", ids=list(ids), **owner(scope))
        )
        return response.count or 0

    async def purge(self, scope: Scope) -> int:
        response = await self.call(build(EpisodeRequest, operation="purge", **owner(scope)))
        return response.count or 0

    async def forget(self, user: str, *, collection: str = "") -> Forgotten:
        response = await self.call(
            build(EpisodeRequest, operation="forget", user=user, collection=collection)
        )
        return response.forgotten or Forgotten()
