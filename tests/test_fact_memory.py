"""Fact memory over the real embedded broker and the real edge store; the real MiniLM model
where what it finds is tested (``model_facts``), a hashed bag of words elsewhere."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemorySettings
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.embedding.base import Embedder
from react_mem.embedding.shared import shared_embedder
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service
from tests.support.memory_services import START, Raw
from tests.support.recording import eventually

pytestmark = pytest.mark.broker

T0 = START


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The process-wide MiniLM embedder the services use (loaded once per session)."""
    return shared_embedder(FactMemorySettings.load({"id": "fact-memory-tests"}))


class Service(FactService):
    def size(self) -> float | None:
        return self.gauge("tg_memory_items")


fact_service = functools.partial(shared_fact_service, client=Service, embedder=HashingEmbedder())


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[Service]:
    async with fact_service(transport, registry, tmp_path, unique) as service:
        yield service


@pytest.fixture
async def model_facts(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    embedder: Embedder,
) -> AsyncIterator[Service]:
    """On the real model: for what similarity decides (retrieval, near-duplicates)."""
    async with fact_service(transport, registry, tmp_path, unique, embedder=embedder) as service:
        yield service


async def test_stored_fact_is_retrieved_by_text_and_by_vector(
    model_facts: Service, embedder: Embedder
) -> None:
    carol, _, _ = await model_facts.store(
        "Carol has a pet tortoise named Sheldon.",
        "The quarterly report is due on the first Monday of April.",
        "Dmitri prefers his coffee black without sugar.",
    )
    found = (
        await model_facts.ok("retrieve", query="What kind of pet does Carol own?", top_k=3)
    ).facts
    assert found[0].id == carol
    assert found[0].content == "Carol has a pet tortoise named Sheldon."
    scores = [f.score for f in found]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert found[0].access_count == 1 and found[0].last_accessed == T0

    await embedder.start()
    [vector] = await embedder.embed(["Who has a tortoise?"])
    by_vector = (await model_facts.ok("retrieve", vector=vector, top_k=1)).facts
    assert [f.id for f in by_vector] == [carol]
    model_facts.clock.now = T0 + 5
    assert (await model_facts.one(carol)).access_count == 2
    assert (await model_facts.one(carol)).last_accessed == T0  # a get is not a retrieval

    strict = await model_facts.ok(
        "retrieve",
        query="What kind of pet does Carol own?",
        min_score=0.99,
        retrieval={"mode": "dense"},
    )
    assert strict.facts == []  # hybrid: min_score bounds the dense side, words still match
    both = await model_facts.ok("retrieve", query="Carol's tortoise", vector=vector, top_k=1)
    assert [f.id for f in both.facts] == [carol]  # the vector embeds, the query's words rank
    assert await model_facts.error("retrieve", top_k=1) == "bad-request"
    assert await model_facts.error("retrieve", vector=[0.1, 0.2]) == "bad-request"
    assert model_facts.size() == 3


async def test_redelivered_store_does_not_duplicate_or_reinforce(
    facts: Service, transport: PulsarTransport, unique: str
) -> None:
    request, response = facts.topics["ws-a"]["request"], facts.topics["ws-a"]["response"]
    replies = await transport.consumer(Queue.parse(response), f"t-{unique}")
    producer = await transport.producer(Queue.parse(request))
    message = FactRequest(
        operation="store",
        facts=[
            FactInput(content="Erin's flight to Oslo leaves at 7am."),
            FactInput(content="Erin is allergic to peanuts."),
        ],
    ).encode()
    try:
        answers = []
        for _ in range(2):  # the same message, delivered twice
            await producer.send(message, {"id": f"req-{unique}"})
            delivery = await asyncio.wait_for(replies.receive(), 30)
            await replies.ack(delivery)
            answers.append(FactResponse.decode(delivery.data))
    finally:
        await producer.close()
        await replies.close()
    first, second = answers
    assert first.error is None and first.stored == second.stored
    assert [s.status for s in first.stored] == ["added", "added"]
    listed = await facts.listed()
    assert sorted(f.id for f in listed) == sorted(s.id for s in first.stored)
    assert [f.access_count for f in listed] == [0, 0]
    # A new request restating a fact does reinforce it.
    again = await facts.ok("store", facts=[FactInput(content="Erin is allergic to peanuts")])
    assert again.stored[0].status == "reinforced" and again.stored[0].id == first.stored[1].id


async def test_near_duplicate_reinforces_instead_of_adding(model_facts: Service) -> None:
    [bob] = await model_facts.store("Bob's favourite colour is green.")
    same = (
        await model_facts.ok(
            "store", facts=[FactInput(content="  BOB'S favourite   colour is green")]
        )
    ).stored
    assert (same[0].id, same[0].status, same[0].similarity) == (bob, "reinforced", 1.0)
    assert (await model_facts.one(bob)).confidence == pytest.approx(0.76)  # 0.7, 20% towards 1
    near = (
        await model_facts.ok(
            "store", facts=[FactInput(content="Bob's favorite color is green.", confidence=0.9)]
        )
    ).stored
    assert near[0].id == bob and near[0].status == "reinforced"
    assert near[0].similarity is not None and 0.92 <= near[0].similarity < 1.0
    other = (
        await model_facts.ok(
            "store", facts=[FactInput(content="Bob works as a carpenter in Leeds.")]
        )
    ).stored
    assert other[0].status == "added" and other[0].id != bob

    fact = await model_facts.one(bob)
    assert fact.access_count == 2
    assert fact.confidence == pytest.approx(0.9)  # the restatement's own, above 0.808
    assert fact.content == "Bob's favourite colour is green."  # the first wording stays
    assert len(await model_facts.listed()) == 2

    # In one batch: a near-duplicate of a stored fact, and one of a fact new in the batch.
    texts = [
        "Bob's favorite colour is green.",
        "Carol keeps bees on her allotment.",
        "Carol keeps bees at her allotment.",
        "The office moved to Manchester in May.",
    ]
    batch = (await model_facts.ok("store", facts=[FactInput(content=t) for t in texts])).stored
    assert [s.status for s in batch] == ["reinforced", "added", "added", "added"]
    assert batch[0].id == bob and (await model_facts.one(bob)).access_count == 3
    assert batch[2].id == batch[1].id and (batch[2].similarity or 0) >= 0.92
    assert batch[3].id not in {bob, batch[1].id}
    assert len(await model_facts.listed()) == 4

    # Within one batch, an exact repetition merges into the fact the batch adds.
    batch = (
        await model_facts.ok(
            "store",
            facts=[
                FactInput(content="Frank plays the cello."),
                FactInput(content="frank plays the cello"),
            ],
        )
    ).stored
    assert batch[0].id == batch[1].id and batch[0].status == "added"
    assert len(await model_facts.listed()) == 5


async def test_alike_facts_that_differ_in_a_negation_or_a_code_stay_distinct(
    model_facts: Service,
) -> None:
    """Issue 11: "not allergic" was merged into "allergic" and "code word 1" into "code
    word 0" by cosine similarity alone; the merge guard keeps each a fact of its own."""
    allergic, negated = "Alice is allergic to penicillin.", "Alice is not allergic to penicillin."
    codes = ["Remember code word 0: KWccec0bx0", "Remember code word 1: KWccec0bx1"]
    [first] = await model_facts.store(allergic)
    stored = (await model_facts.ok("store", facts=[FactInput(content=negated)])).stored
    assert [s.status for s in stored] == ["added"] and stored[0].id != first
    # Within one batch too (the second is checked against the first, new in the batch).
    batch = (await model_facts.ok("store", facts=[FactInput(content=c) for c in codes])).stored
    assert [s.status for s in batch] == ["added", "added"] and batch[0].id != batch[1].id

    ids = [first, stored[0].id, batch[0].id, batch[1].id]
    got = await model_facts.ok("get", ids=ids)
    assert [f.content for f in got.facts] == [allergic, negated, *codes] and not got.missing
    assert all(f.access_count == 0 and f.aliases == [] for f in got.facts)  # none reinforced
    # Both of each pair are retrieved, as distinct records that embed alike: above the
    # store's near-duplicate threshold (0.92), so similarity alone would merge them.
    for query, pair in ((allergic, ids[:2]), (codes[1], ids[2:])):
        found = (await model_facts.ok("retrieve", query=query, top_k=2)).facts
        assert {f.id for f in found} == set(pair)
        assert min(f.score or 0.0 for f in found) >= 0.92
    assert len(await model_facts.listed()) == 4


async def test_a_restatement_reinforces_and_keeps_its_wording(model_facts: Service) -> None:
    [tea] = await model_facts.store("Alice likes green tea.")
    for same in ("Alice likes green tea!", "alice likes green tea"):
        [s] = (await model_facts.ok("store", facts=[FactInput(content=same)])).stored
        assert (s.id, s.status, s.similarity) == (tea, "reinforced", 1.0)
    # Other words than the normalised text, but only filler and a plural: a near-duplicate.
    for near in (
        "Alice likes the green tea.",
        "Alice likes green teas",
        "alice likes THE green tea",
    ):
        [s] = (await model_facts.ok("store", facts=[FactInput(content=near)])).stored
        assert (s.id, s.status) == (tea, "reinforced")
        assert s.similarity is not None and 0.92 <= s.similarity < 1.0
    fact = await model_facts.one(tea)
    assert fact.content == "Alice likes green tea." and fact.access_count == 5
    # Each merged wording is kept, once (the last one repeats the first by normalised text).
    assert fact.aliases == ["Alice likes the green tea.", "Alice likes green teas"]
    assert [f.aliases for f in (await model_facts.ok("history", fact_id=tea)).facts] == [
        fact.aliases
    ]
    assert len(await model_facts.listed()) == 1


async def test_scopes_never_leak_between_workspaces_collections_and_users(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    secret = "The vault combination is 31-4-15."
    query = "What is the vault combination?"
    async with fact_service(
        transport, registry, tmp_path, unique, workspaces=("ws-a", "ws-b")
    ) as facts:
        [in_a] = await facts.store(secret)
        alice_key = "Alice keeps her spare key under the blue flowerpot."
        [alices] = await facts.store(alice_key, collection="c1", user="alice")
        # Another workspace: nothing is visible, and the same text is a separate fact there.
        b = {"workspace": "ws-b"}
        assert (await facts.ok("retrieve", query=query, **b)).facts == []
        assert await facts.listed(**b) == []
        assert (await facts.ok("get", ids=[in_a], **b)).missing == [in_a]
        assert (await facts.ok("purge", **b)).deleted == 0
        [in_b] = (await facts.ok("store", facts=[FactInput(content=secret)], **b)).stored
        assert in_b.status == "added" and in_b.id != in_a
        # Another collection of the same workspace.
        assert (await facts.ok("retrieve", query=query, collection="c2")).facts == []
        assert await facts.listed(collection="c2") == []
        # Another user of the same collection, or none: only the owner sees it.
        key_query = "Where is the spare key?"
        assert (
            await facts.ok("retrieve", query=key_query, collection="c1", user="bob")
        ).facts == []
        assert (await facts.ok("get", ids=[alices], collection="c1", user="bob")).missing == [
            alices
        ]
        assert (await facts.ok("delete", ids=[alices], collection="c1", user="bob")).deleted == 0
        for user in (None, ""):  # no user: the collection's shared facts, never a user's
            nobody = {"collection": "c1", "user": user}
            assert (await facts.ok("retrieve", query=key_query, **nobody)).facts == []
            assert (await facts.ok("get", ids=[alices], **nobody)).missing == [alices]
            assert await facts.listed(**nobody) == []
            assert (await facts.ok("delete", ids=[alices], **nobody)).deleted == 0
            assert (await facts.ok("purge", **nobody)).deleted == 0
        found = (await facts.ok("retrieve", query=key_query, collection="c1", user="alice")).facts
        assert [f.id for f in found] == [alices]
        # The same words stored collection-wide are not taken for Alice's fact.
        [shared] = (
            await facts.ok("store", facts=[FactInput(content=alice_key)], collection="c1")
        ).stored
        assert shared.status == "added" and shared.id != alices
        assert (await facts.one(alices, collection="c1", user="alice")).access_count == 1
        assert [f.id for f in (await facts.ok("retrieve", query=query)).facts] == [in_a]


async def test_expired_facts_are_never_returned_and_are_swept(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(transport, registry, tmp_path, unique, sweep_interval=0.05) as facts:
        stored = await facts.ok(
            "store",
            facts=[
                FactInput(
                    content="The parking permit for lot C is valid this week.", ttl_seconds=60
                ),
                FactInput(content="Grace was born in Lisbon."),
            ],
        )
        short, lasting = (s.id for s in stored.stored)
        assert (await facts.one(short)).expires_at == T0 + 60
        facts.clock.now = T0 + 30
        found = await facts.ok("retrieve", query="parking permit lot C", top_k=2)
        assert short in [f.id for f in found.facts]

        facts.clock.now = T0 + 61  # expired, perhaps not yet swept: never returned
        found = await facts.ok("retrieve", query="parking permit lot C", top_k=2)
        assert [f.id for f in found.facts] == [lasting]
        assert (await facts.ok("get", ids=[short, lasting])).missing == [short]
        assert [f.id for f in await facts.listed()] == [lasting]
        await eventually(lambda: facts.size() == 1, timeout=10)
        facts.clock.now = T0  # had the sweep not deleted it, it would be visible again
        assert (await facts.ok("get", ids=[short])).missing == [short]


async def test_quota_is_enforced_per_scope_and_a_rejected_batch_writes_nothing(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(transport, registry, tmp_path, unique, max_facts_per_scope=3) as facts:
        first, _ = await facts.store("Henry drives a red van.", "Iris teaches chemistry.")
        over = await facts.ask(
            "store",
            facts=[
                FactInput(content="Henry drives a red van"),
                FactInput(content="Jack speaks Welsh."),
                FactInput(content="Kim runs marathons."),
            ],
        )
        assert over.error is not None and over.error.type == "quota-exceeded"
        assert "holds 2 facts" in over.error.message and "at most 3" in over.error.message
        assert len(await facts.listed()) == 2
        assert (await facts.one(first)).access_count == 0  # the batch's reinforcement too
        await facts.store("Jack speaks Welsh.")
        assert (
            await facts.error("store", facts=[FactInput(content="Kim runs marathons.")])
            == "quota-exceeded"
        )
        # Restating a fact needs no room; another user has a quota of their own.
        assert (
            await facts.ok("store", facts=[FactInput(content="Iris teaches chemistry")])
        ).stored[0].status == "reinforced"
        assert len(await facts.store("Kim runs marathons.", user="kim")) == 1


async def test_update_supersedes_and_keeps_the_history(facts: Service) -> None:
    [paris] = await facts.store("Liam lives in Paris.", conversation_id="c1")
    facts.clock.now = T0 + 10
    moved = await facts.ok("update", fact_id=paris, fact=FactInput(content="Liam lives in London."))
    [london] = [s.id for s in moved.stored]
    assert moved.stored[0].status == "added" and london != paris

    found = (await facts.ok("retrieve", query="Where does Liam live?", top_k=5)).facts
    assert [f.id for f in found] == [london]
    assert [f.id for f in await facts.listed()] == [london]
    old, new = (await facts.ok("get", ids=[paris, london])).facts
    assert (old.superseded_by, old.supersedes) == (london, None)
    assert (new.supersedes, new.superseded_by, new.created_at) == (paris, None, T0 + 10)
    assert new.source_conversation == "c1"  # inherited from the old version

    assert (
        await facts.error("update", fact_id=paris, fact=FactInput(content="Liam lives in Rome."))
        == "superseded"
    )
    stale = (await facts.ok("store", facts=[FactInput(content="Liam lives in Paris")])).stored
    assert [(f.id, f.status) for f in stale] == [(paris, "superseded")]
    assert [f.id for f in await facts.listed()] == [london]
    [berlin] = (
        await facts.ok("update", fact_id=london, fact=FactInput(content="Liam lives in Berlin."))
    ).stored
    for any_version in (paris, london, berlin.id):
        history = (await facts.ok("history", fact_id=any_version)).facts
        assert [f.content for f in history] == [
            "Liam lives in Paris.",
            "Liam lives in London.",
            "Liam lives in Berlin.",
        ]
    assert (
        await facts.error(
            "update", fact_id=berlin.id, fact=FactInput(content="liam lives in berlin")
        )
        == "unchanged"
    )
    assert await facts.error("update", fact_id=paris) == "bad-request"
    assert (
        await facts.error("history", fact_id="00000000-0000-0000-0000-000000000000") == "not-found"
    )
    # Updating back to an old version's content makes that record current again.
    back = await facts.ok(
        "update", fact_id=berlin.id, fact=FactInput(content="Liam lives in Paris.")
    )
    assert [(f.id, f.status) for f in back.stored] == [(paris, "reinforced")]
    assert [f.id for f in await facts.listed()] == [paris]
    history = (await facts.ok("history", fact_id=paris)).facts
    assert [f.id for f in history] == [london, berlin.id, paris]


async def test_purge_by_conversation_by_user_and_by_collection(facts: Service) -> None:
    await facts.store(
        "Mia ordered the blue sofa.", "Mia wants delivery on Friday.", conversation_id="c1"
    )
    [c2] = await facts.store("Noah asked about the warranty.", conversation_id="c2")
    [olivia] = await facts.store("Olivia is vegetarian.", user="olivia")
    [shared] = await facts.store("The office closes at 6pm.")
    [elsewhere] = await facts.store("The office closes at 6pm.", collection="other")

    assert (await facts.ok("purge", conversation_id="c1")).deleted == 2
    assert sorted(f.id for f in await facts.listed()) == sorted([c2, shared])
    assert (await facts.ok("purge", user="olivia", conversation_id="c2")).deleted == 0
    assert [f.id for f in await facts.listed(user="olivia")] == [olivia]
    assert (await facts.ok("purge", user="olivia")).deleted == 1
    assert await facts.listed(user="olivia") == []
    assert (await facts.ok("purge")).deleted == 2  # the collection's shared facts
    assert await facts.listed() == []
    assert [f.id for f in await facts.listed(collection="other")] == [elsewhere]


async def test_get_delete_and_paged_list(facts: Service) -> None:
    ids = await facts.store(*(f"Room {n} is on floor {n % 4}." for n in range(7)))
    pages, offset = [], None
    while True:
        page = await facts.ok("list", limit=3, offset=offset)
        pages.append([f.id for f in page.facts])
        offset = page.next_offset
        if offset is None:
            break
    assert sorted(i for p in pages for i in p) == sorted(ids) and max(map(len, pages)) == 3
    # The former names, ``cursor`` and ``next_cursor``, still work; a made-up offset does not.
    first = await facts.ok("list", limit=3)
    by_cursor = await facts.ok("list", limit=3, cursor=first.next_cursor)
    assert first.next_cursor == first.next_offset and [f.id for f in by_cursor.facts] == pages[1]
    assert await facts.error("list", offset="page-2") == "bad-request"
    assert (await facts.ok("delete", ids=ids[:2])).deleted == 2
    got = await facts.ok("get", ids=[ids[0], ids[2].upper()])
    assert [f.id for f in got.facts] == [ids[2]] and got.missing == [ids[0]]
    assert facts.size() == 5


async def test_bad_input_is_answered_writes_nothing_and_the_consumer_keeps_serving(
    facts: Service, transport: PulsarTransport, unique: str
) -> None:
    good = FactInput(content="Quinn's locker is number 42.")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("store", {"facts": [good, FactInput(content="   ")]}, "bad-content"),
        ("store", {"facts": [good, FactInput(content="x" * 4001)]}, "bad-content"),
        ("store", {"facts": [FactInput(content="y", metadata={"k": "v" * 4000})]}, "bad-content"),
        ("store", {"facts": []}, "bad-request"),
        ("store", {"facts": [good], "collection": ""}, "missing-scope"),
        ("remember", {}, "bad-operation"),
        ("forget", {}, "bad-request"),  # forget needs a user
        ("retrieve", {"query": ""}, "bad-content"),
        ("get", {"ids": ["not-a-uuid"]}, "bad-id"),
        ("list", {"limit": 5000}, "bad-request"),
    ]
    for operation, fields, kind in cases:
        assert await facts.error(operation, **fields) == kind, (operation, fields)

    request, response = facts.topics["ws-a"]["request"], facts.topics["ws-a"]["response"]
    replies = await transport.consumer(Queue.parse(response), f"t-{unique}")
    producer = await transport.producer(Queue.parse(request))
    try:
        wrong_types = [
            b'{"operation": "store", "facts": "Quinn likes tea"}',
            b'{"operation": "store", "facts": [{"content": 42}]}',
            b'{"operation": "retrieve", "query": "tea", "top_k": "many"}',
            b"not json",
            json.dumps(
                {
                    "operation": "store",
                    "facts": [{"content": "x", "source_conversation": "c" * 300}],
                }
            ).encode(),
        ]
        for n, body in enumerate(wrong_types):
            await producer.send(body, {"id": f"bad-{n}"})
            delivery = await asyncio.wait_for(replies.receive(), 30)
            await replies.ack(delivery)
            error = FactResponse.decode(delivery.data).error
            assert delivery.properties["id"] == f"bad-{n}"
            assert error is not None and error.type in {"invalid", "malformed"}
    finally:
        await producer.close()
        await replies.close()

    assert await facts.listed() == [] and facts.size() == 0
    assert len(await facts.store(good.content)) == 1  # still serving


async def test_an_unknown_or_missing_operation_is_refused_and_purges_nothing(
    facts: Service,
) -> None:
    """Operations are a closed type: a request naming one the service lacks is refused when
    it is decoded, never dispatched (a name without a branch used to fall through to a
    purge of the scope)."""
    await facts.store("Rowan keeps bees.")
    assert await facts.error("archive") == "bad-operation"
    for body in ({}, {"operation": 42}, {"operation": None}, {"operation": "Purge"}):
        reply = await facts.running.ask(Raw(body=body), "ws-a")
        assert reply.error is not None and reply.error.type == "bad-operation", body
        assert "operation" in reply.error.message
    assert [f.content for f in await facts.listed()] == ["Rowan keeps bees."]
