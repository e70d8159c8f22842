"""A retrieve ``with_steps=False`` (the agent's recall asks so) answers what the same
retrieve with steps does, less the steps: the same episodes, order and similarities, for
the request's own search and each ``also`` search, by words, by a vector and lexically,
over the real bus; other operations and a plain retrieve keep the steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.clients.episodes import EpisodeClient
from react_mem.schema.episodes import Episode, EpisodeRequest, EpisodeSearch
from react_mem.schema.retrieval import RetrievalOptions
from react_mem.schema.scope import Scope
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock
from tests.test_episode_memory import DAY, STEPS, episode_service, ok, store
from tests.test_episode_retrieve_also import GOALS

ALSO = [EpisodeSearch(top_k=3, task_type="currency"), EpisodeSearch(top_k=4, outcome="failure")]


def stepless(episodes: list[Episode]) -> list[Episode]:
    return [e.model_copy(update={"steps": []}) for e in episodes]


async def test_a_retrieve_without_steps_finds_the_same_episodes_less_their_steps(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    embedder = HashingEmbedder()
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, embedder=embedder
    ) as service:
        for goal, outcome, task_type in GOALS:
            await ok(service, store(goal, outcome, session_id=goal, task_type=task_type))
            clock.advance(DAY)
        [vector] = await embedder.embed(["convert money"])
        queries: list[dict[str, Any]] = [
            {"goal": "convert money", "context": "for a trip"},
            {"goal": "convert money", "vector": vector},
            {"goal": "convert", "retrieval": RetrievalOptions(mode="lexical"), "min_score": 0.0},
        ]
        for query in queries:
            asked = {"operation": "retrieve", "top_k": 4, "also": ALSO, **query}
            full = await ok(service, EpisodeRequest(**asked))
            lean = await ok(service, EpisodeRequest(**asked, with_steps=False))
            assert full.episodes and all(e.steps == STEPS for e in full.episodes), query
            assert all(hits.episodes for hits in full.also), query
            assert lean.episodes == stepless(full.episodes), query
            assert [h.episodes for h in lean.also] == [stepless(h.episodes) for h in full.also]
            assert not any(e.steps for h in lean.also for e in [*lean.episodes, *h.episodes])
            # The steps stay stored: a get (the inspector's, the CLI's) reads them whole.
            ids = [e.id for e in lean.episodes]
            got = await ok(service, EpisodeRequest(operation="get", ids=ids))
            assert got.episodes and all(e.steps == STEPS for e in got.episodes)


async def test_the_client_asks_without_steps_when_told(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(transport, registry, tmp_path, unique) as service:
        await ok(service, store("convert 100 euros to dollars", session_id="s1"))
        client = EpisodeClient(service.clients["default"])
        owner = Scope("default", "default")
        [with_steps] = await client.retrieve_each(owner, [EpisodeSearch()], goal="convert")
        [without] = await client.retrieve_each(
            owner, [EpisodeSearch()], goal="convert", steps=False
        )
        alone = await client.retrieve(owner, goal="convert", steps=False)
        assert with_steps and with_steps[0].steps == STEPS
        assert without == alone == stepless(with_steps)
