"""Facts keep when what they say happened (``valid_at``), and the text around them
(``context``); a question naming a time ranks the facts of that time higher, and one worded
like a fact's context finds it (hybrid retrieval), over the real broker, edge store and MiniLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FactInput
from react_mem.schema.retrieval import RetrievalOptions
from tests.support.fact_memory import FactService, fact_service
from tests.support.memory_services import until

pytestmark = pytest.mark.broker


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[FactService]:
    async with fact_service(transport, registry, tmp_path, unique, client=FactService) as service:
        yield service


def at(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()


async def test_a_question_naming_a_time_ranks_the_facts_of_that_time_first(
    facts: FactService,
) -> None:
    stored = await facts.ok(
        "store",
        facts=[
            FactInput(
                content="Maria went hiking in the hills with her dog", valid_at=at("2023-03-04")
            ),
            FactInput(
                content="Maria went hiking along the coast with friends", valid_at=at("2023-07-09")
            ),
            FactInput(content="Maria baked bread for the shelter"),
        ],
    )
    march, july, _ = [s.id for s in stored.stored]
    ask = "Where did Maria go hiking in July 2023?"
    found = (await facts.ok("retrieve", query=ask, top_k=2)).facts
    assert [f.id for f in found] == [july, march]
    assert found[0].valid_at == at("2023-07-09")
    ask = "Where did Maria go hiking in March 2023?"
    found = (await facts.ok("retrieve", query=ask, top_k=2)).facts
    assert [f.id for f in found] == [march, july]
    off = RetrievalOptions(time_boost=False)
    plain = (await facts.ok("retrieve", query=ask, top_k=2, retrieval=off)).facts
    assert {f.id for f in plain} == {march, july}


async def test_a_facts_context_finds_it_by_words_and_is_never_returned(facts: FactService) -> None:
    stored = await facts.ok(
        "store",
        facts=[
            FactInput(content="It was paid on Monday.", context="Did invoice QX-77 get paid?"),
            FactInput(content="The office plants need water on Fridays."),
            FactInput(content="Lunch is at noon on weekdays."),
        ],
    )
    paid = stored.stored[0].id
    found = (await facts.ok("retrieve", query="What happened to invoice QX-77?", top_k=1)).facts
    assert [f.id for f in found] == [paid]
    assert "QX-77" not in found[0].model_dump_json()  # the context stays inside the store


async def test_a_question_asking_when_ranks_a_fact_that_tells_a_time_first(
    facts: FactService,
) -> None:
    stored = await facts.ok(
        "store",
        facts=[
            FactInput(content="Maria loves hiking in the hills; hiking is her favourite hobby"),
            FactInput(content="Maria went for a walk in the woods with friends last weekend"),
            FactInput(content="Maria baked bread for the shelter"),
        ],
    )
    loves, went, _ = [s.id for s in stored.stored]
    ask = "When did Maria go hiking in the hills?"
    off = RetrievalOptions(time_boost=False)
    plain = (await facts.ok("retrieve", query=ask, top_k=1, retrieval=off)).facts
    assert [f.id for f in plain] == [loves]  # words alone favour the hobby
    found = (await facts.ok("retrieve", query=ask, top_k=2)).facts
    assert [f.id for f in found] == [went, loves]
    ask = "Where does Maria like hiking?"  # asks no time: the words decide
    found = (await facts.ok("retrieve", query=ask, top_k=1)).facts
    assert [f.id for f in found] == [loves]


async def test_facts_stored_before_the_tells_time_flag_get_it_when_the_service_starts(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    """A store written before the flag existed: the next service to open it fills it in
    (its first sweep), and "when" questions lift those facts too."""
    ask, owner = "When did Maria go hiking in the hills?", Scope("ws-a", "default")
    async with fact_service(
        transport, CollectorRegistry(), tmp_path, unique, client=FactService
    ) as old:
        stored = await old.ok(
            "store",
            facts=[
                FactInput(content="Maria loves hiking in the hills; hiking is her favourite hobby"),
                FactInput(content="Maria went for a walk in the woods with friends last weekend"),
            ],
        )
        loves, went = [s.id for s in stored.stored]
        ctx = old.processor.memory.ctx
        for id in (loves, went):  # as written before the flag existed
            await ctx.store.set_payload(ctx.collection, [id], {"tells_time": None}, scope=owner)
        boosted = (await old.ok("retrieve", query=ask, top_k=2)).facts
        off = RetrievalOptions(time_boost=False)
        plain = (await old.ok("retrieve", query=ask, top_k=2, retrieval=off)).facts
        assert [f.id for f in boosted] == [f.id for f in plain]  # no flag: nothing lifted
    async with fact_service(
        transport, CollectorRegistry(), tmp_path, unique, client=FactService
    ) as new:
        ctx = new.processor.memory.ctx

        async def filled() -> bool:
            records = await ctx.get([loves, went], owner)
            return {r.id: r.payload.get("tells_time") for r in records} == {
                loves: False,
                went: True,
            }

        await until(filled)
        found = (await new.ok("retrieve", query=ask, top_k=2)).facts
        assert [f.id for f in found] == [went, loves]
