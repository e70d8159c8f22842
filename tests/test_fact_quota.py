"""fact-memory's quotas over the real broker, store and embedder: eviction at the user's
quota by the retention rule (``evict``), and the collection-wide quota (issue 11, defect 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FactInput
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService, fact_service

pytestmark = pytest.mark.broker


def fact(content: str, importance: float) -> FactInput:
    return FactInput(content=content, importance=importance)


async def test_evict_gives_up_history_then_the_least_important_then_the_least_used(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        client=FactService,
        embedder=HashingEmbedder(),
        max_facts_per_scope=4,
    ) as facts:
        [old] = await facts.store("Nora lives in Oslo.", user="nora")
        await facts.ok(
            "update", user="nora", fact_id=old, fact=FactInput(content="Nora lives in Bergen.")
        )  # the Oslo record is now history
        low = [fact("Nora plays chess.", 0.2), fact("Nora drinks green tea.", 0.2)]
        [_, tea] = [s.id for s in (await facts.ok("store", user="nora", facts=low)).stored]
        facts.clock.advance(10)
        await facts.ok("retrieve", user="nora", query="Nora plays chess", top_k=1)  # used

        new = [fact("Nora is allergic to shellfish.", 0.8), fact("Nora's code is KX-71.", 0.8)]
        # Without ``evict`` the quota refuses, as before.
        assert await facts.error("store", user="nora", facts=new) == "quota-exceeded"
        reply = await facts.ok("store", user="nora", facts=new, evict=True)

        assert reply.evicted == [old, tea]  # history, then the least important never used
        held = sorted(f.content for f in await facts.listed(user="nora"))
        assert held == [
            "Nora is allergic to shellfish.",
            "Nora lives in Bergen.",
            "Nora plays chess.",
            "Nora's code is KX-71.",
        ]
        labels = {"processor": facts.processor.id, "kind": "fact"}
        assert registry.get_sample_value("tg_memory_quota_evictions_total", labels) == 2


async def test_evict_never_gives_up_a_more_important_fact(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        client=FactService,
        embedder=HashingEmbedder(),
        max_facts_per_scope=1,
    ) as facts:
        await facts.ok("store", user="ole", facts=[fact("Ole is allergic to latex.", 0.9)])
        trivia = [fact("Ole watched a film.", 0.3)]
        assert await facts.error("store", user="ole", facts=trivia, evict=True) == "quota-exceeded"
        assert [f.content for f in await facts.listed(user="ole")] == ["Ole is allergic to latex."]


async def test_the_collection_quota_holds_across_users_and_is_never_evicted_for(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        client=FactService,
        embedder=HashingEmbedder(),
        max_facts_per_collection=2,
    ) as facts:
        await facts.store("Pia sings.", user="pia")
        await facts.store("Quinn rows.", user="quinn")
        for user in ("invented-1", "invented-2"):  # new user ids do not escape it
            error = await facts.error("store", user=user, facts=[fact("X is y.", 0.9)], evict=True)
            assert error == "quota-exceeded"
        assert len(await facts.listed(user="pia")) == len(await facts.listed(user="quinn")) == 1
        # Restating a fact needs no room; another collection has room of its own.
        assert (await facts.ok("store", user="pia", facts=[fact("Pia sings", 0.5)])).stored
        assert await facts.store("Pia sings.", user="pia", collection="other")
        refused = {"processor": facts.processor.id, "kind": "fact", "quota": "collection"}
        assert registry.get_sample_value("tg_memory_quota_refusals_total", refused) == 2
