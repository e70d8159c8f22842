"""A retrieve's ``also`` searches: one request answers what separate retrieves by the same
query would, search by search (the same episodes, the same order, the same similarities),
over the real bus; bad searches are refused before anything is searched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.episodes import EpisodeRequest, EpisodeSearch
from react_mem.schema.retrieval import RetrievalOptions
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import START, MovableClock, Raw
from tests.test_episode_memory import DAY, episode_service, ok, store

GOALS = [
    ("convert 100 euros to dollars", "success", "currency"),
    ("convert 50 pounds to yen", "failure", "currency"),
    ("convert dollars to pesos for a trip", "partial", "travel"),
    ("book a table for two in Paris", "success", "travel"),
    ("find the capital of Australia", "failure", ""),
    ("convert a recipe from cups to grams", "success", "cooking"),
]

#: Each a search's own size and filters, as the agent's recent lessons or a caller's.
SEARCHES = [
    EpisodeSearch(top_k=2),
    EpisodeSearch(top_k=3, since=START + 2.5 * DAY),
    EpisodeSearch(top_k=5, task_type="currency"),
    EpisodeSearch(top_k=4, outcome="failure"),
    EpisodeSearch(top_k=6, since=START + DAY, until=START + 4.5 * DAY, outcome="success"),
]


async def test_also_answers_each_search_as_its_own_retrieve_would(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    embedder = HashingEmbedder()
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, embedder=embedder
    ) as service:
        for goal, outcome, task_type in GOALS:  # one a day: ``since`` tells them apart
            reply = await ok(service, store(goal, outcome, session_id=goal, task_type=task_type))
            assert reply.created is True
            clock.advance(DAY)
        [vector] = await embedder.embed(["convert money"])
        queries: list[dict[str, Any]] = [
            {"goal": "convert money", "context": "for a trip"},  # the service embeds it
            {"goal": "convert money", "vector": vector},  # the agent's: its vector
            {"goal": "convert", "retrieval": RetrievalOptions(mode="lexical"), "min_score": 0.0},
        ]
        for query in queries:
            alone = []
            for search in SEARCHES:
                request = EpisodeRequest(operation="retrieve", **query, **search.model_dump())
                alone.append((await ok(service, request)).episodes)
            assert any(alone) and alone[0] != alone[3], "the searches find different episodes"
            first, *others = SEARCHES
            together = await ok(
                service,
                EpisodeRequest(operation="retrieve", **query, **first.model_dump(), also=others),
            )
            assert together.episodes == alone[0], query
            assert [hits.episodes for hits in together.also] == alone[1:], query
            # Without ``also``, a retrieve answers none (as before it existed).
            plain = await ok(service, EpisodeRequest(operation="retrieve", **query, top_k=2))
            assert plain.also == [] and plain.episodes == alone[0]


async def test_a_bad_also_search_is_refused_and_serving_goes_on(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(transport, registry, tmp_path, unique) as service:
        await ok(service, store("convert 100 euros to dollars"))
        client = service.clients["default"]
        too_many = EpisodeRequest(operation="retrieve", goal="convert", top_k=1, also=[]).to_wire()
        too_many["also"] = [{"top_k": 1}] * 5
        over_top_k = EpisodeRequest(
            operation="retrieve", goal="convert", top_k=1, also=[EpisodeSearch(top_k=10_000)]
        )
        for body, kind in ((too_many, "too-large"), (over_top_k.to_wire(), "bad-request")):
            reply = await client.request(Raw(body=body))  # type: ignore[arg-type]
            assert reply.error is not None and reply.error.type == kind, (body, reply.error)
            assert reply.episodes == [] and reply.also == []
        found = await ok(
            service,
            EpisodeRequest(
                operation="retrieve", goal="convert", top_k=1, also=[EpisodeSearch(top_k=1)]
            ),
        )
        assert [e.goal for e in found.episodes] == ["convert 100 euros to dollars"]
        assert [[e.goal for e in h.episodes] for h in found.also] == [
            ["convert 100 euros to dollars"]
        ]
