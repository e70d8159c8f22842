"""episode-memory over the real broker, the embedded Qdrant store and MiniLM."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.episodes.service import EpisodeMemoryProcessor, EpisodeMemorySettings
from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from react_mem.embedding.base import Embedder
from react_mem.embedding.shared import shared_embedder
from react_mem.schema import AgentStep
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.retrieval import RetrievalOptions
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, Raw, Running, serving, topics, until
from tests.support.recording import eventually

pytestmark = pytest.mark.broker

DAY = 86400.0
Service = Running[EpisodeMemoryProcessor, EpisodeRequest, EpisodeResponse]

STEPS = [
    AgentStep(
        thought="look up the rate", action="search", arguments={"q": "EUR USD"}, observation="1.08"
    ),
    AgentStep(
        thought="convert", action="calculator", arguments={"expr": "100*1.08"}, observation="108"
    ),
]


@contextlib.asynccontextmanager
async def episode_service(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    *,
    clock: MovableClock | None = None,
    workspaces: tuple[str, ...] = ("default",),
    embedder: Embedder | None = None,
    **settings: Any,
) -> AsyncIterator[Service]:
    """``embedder``: default a hashed bag of words; the real model where retrieval is tested."""
    async with serving(
        EpisodeMemoryProcessor,
        EpisodeResponse,
        transport,
        pid=f"episode-memory-{unique}",
        queues={ws: topics("episode-memory", unique, ws) for ws in workspaces},
        data_dir=tmp_path / "episodes",
        registry=registry,
        clock=clock or MovableClock(),
        embedder=embedder or HashingEmbedder(),
        **settings,
    ) as running:
        yield running


def store(goal: str, outcome: str = "success", **fields: Any) -> EpisodeRequest:
    return EpisodeRequest(
        operation="store",
        goal=goal,
        outcome=outcome,  # type: ignore[arg-type]
        steps=STEPS,
        lessons=["check the rate first"],
        tokens=321,
        duration_seconds=2.5,
        **({"score": 0.8} | fields),
    )


async def ok(
    service: Service, request: EpisodeRequest, workspace: str = "default"
) -> EpisodeResponse:
    response = await service.ask(request, workspace)
    assert response.error is None, response.error
    return response


async def listed(service: Service, workspace: str = "default", **scope: Any) -> list[str]:
    response = await ok(service, EpisodeRequest(operation="list", limit=200, **scope), workspace)
    return sorted(e.goal for e in response.episodes)


async def test_store_then_retrieve_by_goal_and_context_with_an_outcome_filter(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    model = shared_embedder(EpisodeMemorySettings.load({"id": "episode-memory-tests"}))
    async with episode_service(transport, registry, tmp_path, unique, embedder=model) as service:
        stored = {
            "convert 100 euros to dollars": "success",
            "convert 50 pounds to yen": "failure",
            "book a table for two in Paris": "success",
            "find the capital of Australia": "partial",
        }
        ids = {}
        for goal, outcome in stored.items():
            response = await ok(service, store(goal, outcome, session_id=f"s-{goal}"))
            assert response.created is True and response.id
            ids[goal] = response.id

        found = await ok(
            service,
            EpisodeRequest(
                operation="retrieve",
                goal="currency conversion",
                context="euros into US dollars",
                top_k=2,
            ),
        )
        assert len(found.episodes) == 2
        assert found.episodes[0].goal == "convert 100 euros to dollars"
        best = found.episodes[0]
        assert best.id == ids[best.goal] and best.outcome == "success"
        assert best.steps == STEPS and best.lessons == ["check the rate first"]
        assert (best.tokens, best.duration_seconds, best.score) == (321, 2.5, 0.8)
        assert best.similarity is not None and best.similarity > found.episodes[1].similarity  # type: ignore[operator]

        failures = await ok(
            service,
            EpisodeRequest(
                operation="retrieve", goal="currency conversion", outcome="failure", top_k=5
            ),
        )
        assert [e.goal for e in failures.episodes] == ["convert 50 pounds to yen"]

        strict = await ok(
            service,
            EpisodeRequest(
                operation="retrieve",
                goal="currency conversion",
                min_score=0.99,
                retrieval=RetrievalOptions(mode="dense"),
            ),
        )
        assert strict.episodes == []

        got = await ok(
            service, EpisodeRequest(operation="get", ids=[ids["book a table for two in Paris"]])
        )
        assert [e.goal for e in got.episodes] == ["book a table for two in Paris"]

        # A precomputed query vector (the agent embeds its query once) finds the same.
        [vector] = await model.embed(["currency conversion\neuros into US dollars"])
        by_vector = await ok(service, EpisodeRequest(operation="retrieve", vector=vector, top_k=1))
        assert [e.goal for e in by_vector.episodes] == ["convert 100 euros to dollars"]


async def test_a_redelivered_store_does_not_duplicate(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    embedder = HashingEmbedder()
    async with episode_service(transport, registry, tmp_path, unique, embedder=embedder) as service:
        first = await ok(service, store("plan a trip to Rome", session_id="sess-1"))
        assert embedder.calls == 1  # one embedding per store
        again = await ok(service, store("plan a trip to Rome", session_id="sess-1"))
        assert embedder.calls == 1  # the redelivery embeds nothing
        assert (first.created, again.created) == (True, False)
        assert first.id == again.id
        # Without a session, the same goal and steps in the same scope are the same episode.
        a = await ok(service, store("water the plants"))
        b = await ok(service, store("  water   the plants "))
        assert a.id == b.id and b.created is False
        goals = await listed(service)
        assert len(goals) == 2 and goals[0] == "plan a trip to Rome"


async def test_count_retention_evicts_the_oldest_per_scope(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, max_episodes_per_scope=3
    ) as service:
        await ok(service, store("alice's only task", user="alice"))
        evicted = []
        for n in range(5):
            clock.advance(10)
            evicted.append((await ok(service, store(f"task number {n}"))).evicted)
        assert evicted == [0, 0, 0, 1, 1]
        assert await listed(service) == [  # no user: the shared episodes, never alice's
            "task number 2",
            "task number 3",
            "task number 4",
        ]
        # Alice's bucket was not touched by the user-less stores.
        assert await listed(service, user="alice") == ["alice's only task"]


async def test_a_full_bucket_is_evicted_in_batches(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, max_episodes_per_scope=40
    ) as service:
        evicted = []
        for n in range(42):
            clock.advance(1)
            evicted.append((await ok(service, store(f"job {n:02d}"))).evicted)
        # 41 > 40: the oldest go, down to 40 less a batch of 5% (2); then room for one more.
        assert evicted == [0] * 40 + [3, 0]
        assert await listed(service) == [f"job {n:02d}" for n in range(3, 42)]


async def test_count_retention_evicts_by_value_not_by_age_alone(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """Score (importance) plus recency: an old clean success outlasts newer failures; a
    month later (one half-life) a failure stored today outranks last month's failures."""
    clock = MovableClock()
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, max_episodes_per_scope=3
    ) as service:
        await ok(service, store("the proven way to file a claim", score=1.0))
        for n in range(2):
            clock.advance(10)
            await ok(service, store(f"failed attempt {n}", outcome="failure", score=0.0))
        clock.advance(10)
        assert (await ok(service, store("failed attempt 2", outcome="failure", score=0.0))).evicted
        assert await listed(service) == [
            "failed attempt 1",
            "failed attempt 2",
            "the proven way to file a claim",
        ]
        clock.advance(30 * DAY)
        await ok(service, store("a partial answer today", outcome="partial", score=0.5))
        # Values now: 1 + 0.5, 0 + 0.5, 0 + 0.5, 0.5 + 1: the older failure goes.
        assert await listed(service) == [
            "a partial answer today",
            "failed attempt 2",
            "the proven way to file a claim",
        ]


async def test_age_retention_hides_old_episodes_at_once_and_sweeps_them(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    settings = {"max_age_days": 1, "sweep_interval": 3600}
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, **settings
    ) as service:
        old = await ok(service, store("an old lesson about caching"))
        clock.advance(2 * DAY)
        await ok(service, store("a fresh lesson about caching"))
        found = await ok(
            service, EpisodeRequest(operation="retrieve", goal="caching lessons", top_k=5)
        )
        assert [e.goal for e in found.episodes] == ["a fresh lesson about caching"]
        assert (await ok(service, EpisodeRequest(operation="get", ids=[old.id]))).episodes == []
        assert await listed(service) == ["a fresh lesson about caching"]
        assert await held(service) == 2  # hidden at read time, not yet swept

    # The sweep runs in the background from start-up: a restarted service finds the old
    # episode's scope in its registry and removes it.
    async with episode_service(
        transport, registry, tmp_path, unique, clock=clock, **settings
    ) as service:
        await until(lambda: _equals(held(service), 1))
        gauge = {"processor": service.processor.id, "kind": "episode"}
        await eventually(lambda: registry.get_sample_value("tg_memory_items", gauge) == 1)
        assert await listed(service) == ["a fresh lesson about caching"]


async def held(service: Service) -> int:
    """Episodes physically in the default collection's store, expired or not."""
    processor = service.processor
    scope = Scope("default", "default")
    return await processor.store.count(processor.memory.collection, scope=scope)


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def test_scopes_never_leak_across_workspaces_collections_or_users(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(
        transport, registry, tmp_path, unique, workspaces=("ws-a", "ws-b")
    ) as service:
        goal = "deploy the service to production"
        places = [
            ("ws-a", {"collection": "c1"}),
            ("ws-a", {"collection": "c2"}),
            ("ws-b", {"collection": "c1"}),
            ("ws-a", {"collection": "c1", "user": "bob"}),
        ]
        ids = {}
        for n, (ws, scope) in enumerate(places):
            response = await ok(
                service, store(f"{goal} (copy {n})", session_id="same", **scope), ws
            )
            ids[n] = response.id
        assert len(set(ids.values())) == 4  # same session, different scopes: different episodes

        def retrieve(**scope: Any) -> EpisodeRequest:
            return EpisodeRequest(operation="retrieve", goal=goal, top_k=10, **scope)

        got = lambda r: sorted(e.goal[-7:-1] for e in r.episodes)  # noqa: E731
        assert got(await ok(service, retrieve(collection="c1"), "ws-b")) == ["copy 2"]
        assert got(await ok(service, retrieve(collection="c2"), "ws-a")) == ["copy 1"]
        # A user's query sees only theirs; one without a user only the user-less ones.
        assert got(await ok(service, retrieve(collection="c1"), "ws-a")) == ["copy 0"]
        assert got(await ok(service, retrieve(collection="c1", user=""), "ws-a")) == ["copy 0"]
        assert got(await ok(service, retrieve(collection="c1", user="bob"), "ws-a")) == ["copy 3"]
        assert got(await ok(service, retrieve(collection="c1", user="eve"), "ws-a")) == []
        # Ids from elsewhere are neither readable nor deletable.
        foreign = EpisodeRequest(operation="get", collection="c1", ids=[ids[0], ids[1]])
        assert (await ok(service, foreign, "ws-b")).episodes == []
        delete = EpisodeRequest(operation="delete", collection="c1", ids=[ids[0]])
        assert (await ok(service, delete, "ws-b")).count == 0
        assert (await ok(service, delete, "ws-a")).count == 1


async def test_purge_by_conversation_by_user_and_by_collection(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(transport, registry, tmp_path, unique) as service:
        await ok(service, store("task in conversation one", conversation_id="conv-1", user="ann"))
        await ok(service, store("task in conversation two", conversation_id="conv-2", user="ann"))
        await ok(service, store("ben's task", user="ben"))
        await ok(service, store("other collection task", collection="other"))

        await ok(service, store("shared task"))
        # Without a user, a purge takes the shared episodes only, never a user's.
        nobody = EpisodeRequest(operation="purge", conversation_id="conv-1")
        assert (await ok(service, nobody)).count == 0
        purge = EpisodeRequest(operation="purge", conversation_id="conv-1", user="ann")
        assert (await ok(service, purge)).count == 1
        assert await listed(service, user="ann") == ["task in conversation two"]
        assert (await ok(service, EpisodeRequest(operation="purge", user="ann"))).count == 1
        assert await listed(service, user="ann") == []
        assert (await ok(service, EpisodeRequest(operation="purge"))).count == 1
        assert await listed(service) == []
        assert await listed(service, user="ben") == ["ben's task"]
        assert await listed(service, collection="other") == ["other collection task"]


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"operation": "store", "goal": "   ", "outcome": "success"}, "bad-request"),
    ({"operation": "store", "goal": "g"}, "bad-request"),
    ({"operation": "store", "goal": "g", "outcome": "meh"}, "invalid"),
    ({"operation": "store", "goal": "g", "outcome": "success", "score": 1.5}, "invalid"),
    ({"operation": "store", "goal": "g", "outcome": "success", "steps": "lots"}, "invalid"),
    ({"operation": "store", "goal": "g", "outcome": "success", "tokens": "many"}, "invalid"),
    ({"operation": "store", "goal": "g" * 5000, "outcome": "success"}, "too-large"),
    (
        {"operation": "store", "goal": "g", "outcome": "success", "lessons": ["x" * 3000]},
        "too-large",
    ),
    ({"operation": "store", "goal": "g", "outcome": "success", "collection": ""}, "missing-scope"),
    ({"operation": "store", "goal": "g", "outcome": "success", "user": "u" * 300}, "too-large"),
    ({"operation": "forget-everything"}, "bad-operation"),
    ({"goal": "no operation"}, "bad-operation"),
    ({"operation": "retrieve"}, "bad-request"),
    ({"operation": "retrieve", "goal": "g", "top_k": 500}, "bad-request"),
    ({"operation": "retrieve", "vector": [0.1, 0.2]}, "bad-request"),
    ({"operation": "get", "ids": ["not-a-uuid"]}, "bad-request"),
    ({"operation": "delete", "ids": []}, "bad-request"),
    ({"operation": "list", "offset": "page-two"}, "bad-request"),
]


async def test_bad_input_is_answered_nothing_is_written_and_serving_goes_on(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(transport, registry, tmp_path, unique) as service:
        client = service.clients["default"]
        for body, kind in BAD_INPUT:
            reply = await client.request(Raw(body=body))  # type: ignore[arg-type]
            assert reply.error is not None, body
            assert reply.error.type == kind, (body, reply.error)
        assert await listed(service) == []
        assert (await ok(service, store("still serving"))).created is True
        assert await listed(service) == ["still serving"]
