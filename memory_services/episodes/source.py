"""episode-memory's recall source: the agent's "Relevant Past Episodes" section, with seed
003's recent reflections (named by ``kind.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from pydantic import Field

from react_mem.agent.config import Key
from react_mem.agent.items import Item, episode_items, reflection_items
from react_mem.agent.sources import Ask, MemorySource, setting
from react_mem.clients.base import build
from react_mem.clients.episodes import EPISODE_MEMORY, EpisodeClient
from react_mem.schema.episodes import Episode, EpisodeSearch

SECONDS_PER_DAY = 86400.0
#: Episode-memory's default goal limit: a question recalled by with a state is cut to it.
STATE_GOAL_CHARS = 4000


async def _episodes(ask: Ask) -> list[Item]:
    """The episodes recalled and the recent lessons. Asked by the same query (no state),
    both go in one request (two searches in the service, one round trip: as two requests
    the service answered them one after the other, and the recall waited for the second);
    with a state the episodes are asked by question and state, the lessons by the question,
    side by side. Without the episodes' steps, which the prompt does not show: reading
    them was most of a search's cost where episodes used tools."""
    client = EpisodeClient.of(ask.flow)
    recent = _recent_search(ask)
    relevant = build(EpisodeSearch, top_k=ask.top_k)
    if ask.state:
        episodes, recent_found = await asyncio.gather(
            client.retrieve(
                ask.owner,
                # Also beside the vector: hybrid ranking reads its words (the goal limit).
                goal=ask.question[:STATE_GOAL_CHARS],
                context=ask.state,
                vector=None,  # with a state, the service embeds both
                top_k=ask.top_k,
                min_score=ask.min_score,
                retrieval=ask.cfg.retrieval(),
                steps=False,
            ),
            _recent_alone(client, ask, recent),
        )
    else:
        searches = [relevant] if recent is None else [relevant, recent]
        episodes, *rest = await client.retrieve_each(
            ask.owner,
            searches,
            goal=ask.question,
            vector=ask.vector,
            min_score=ask.min_score,
            retrieval=ask.cfg.retrieval(),
            steps=False,
        )
        recent_found = rest[0] if rest else []
    shown = {e.id for e in episodes}
    lessons = reflection_items([e for e in recent_found if e.id not in shown and e.lessons])
    return episode_items(episodes) + lessons


def _recent_search(ask: Ask) -> EpisodeSearch | None:
    """For seed 003's recent reflections: the owner's latest relevant episodes (of the
    request's task type, if it names one); those the recall shows are left out after.
    None: the prompt shows no recent lessons."""
    top_k = int(setting(ask.cfg, "reflection-top-k"))
    if top_k <= 0:
        return None
    days = float(setting(ask.cfg, "reflection-window-days"))
    return build(
        EpisodeSearch,
        top_k=top_k,
        task_type=ask.task_type or None,
        since=time.time() - days * SECONDS_PER_DAY,
    )


async def _recent_alone(
    client: EpisodeClient, ask: Ask, search: EpisodeSearch | None
) -> list[Episode]:
    if search is None:
        return []
    [found] = await client.retrieve_each(
        ask.owner,
        [search],
        goal=ask.question,
        vector=ask.vector,
        min_score=ask.min_score,
        retrieval=ask.cfg.retrieval(),
        steps=False,
    )
    return found


EPISODES = MemorySource(
    name="episodes",
    service=EPISODE_MEMORY,
    title="Relevant Past Episodes:",
    share=0.25,
    section=20,
    fetch=_episodes,
    top_k="episode-retrieval-top-k",
    min_score="episode-min-score",
    embeds=lambda cfg: True,
    keys=(
        # Recent reflections in the prompt (seed 003): the lessons of up to this many of the
        # owner's episodes from the last ``reflection-window-days``, of the request's task
        # type when it names one, most relevant first, beside the episodes recalled; 0: none.
        Key("reflection-top-k", Annotated[int, Field(ge=0, le=20)], 3),
        Key("reflection-window-days", Annotated[float, Field(gt=0)], 7.0),
    ),
)
