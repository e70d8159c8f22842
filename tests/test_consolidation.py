"""Consolidation of facts and episodes over the real broker, edge store and MiniLM model.

The restatements below were chosen by their MiniLM similarities: each cluster's members are
0.94-0.98 alike (above the default 0.85), unrelated texts below 0.6, and differ only in what
the merge guard lets merge (filler, punctuation, plurals). The fact service runs with a store
near-duplicate threshold of 0.99, so storing them adds separate facts for consolidation to
find.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.episodes.records import canonical_size
from memory_services.episodes.service import EpisodeMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.clients.facts import FactClient
from react_mem.schema import AgentStep
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.episodes import Episode, EpisodeRequest, EpisodeResponse, Outcome
from react_mem.schema.facts import Fact, FactInput, FactRequest, FactResponse
from react_mem.schema.scope import Scope
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service
from tests.support.memory_services import MovableClock, Raw, Running, serving, topics
from tests.support.recording import eventually

pytestmark = pytest.mark.broker

CAT = (
    "Carol's cat is called Misty.",
    "Carol's cat, which is called Misty.",
    "Carol's cats are called Misty.",
)
CAT_IMPORTANT = "Carol's cat - called Misty"
MEETING = (
    "The team meeting is on Tuesday at 10am.",
    "The team meetings are on Tuesdays at 10 am.",
)
COFFEE = "Dmitri prefers his coffee black without sugar."


def utf8(*texts: str) -> int:
    return sum(len(t.encode()) for t in texts)


# -- facts -----------------------------------------------------------------------------
class Facts(FactService):
    async def add(self, content: str, importance: float, **fields: Any) -> str:
        """Store one fact a second after the last, so creation times differ."""
        self.clock.advance(1)
        scope = {k: fields.pop(k) for k in ("workspace", "collection", "user") if k in fields}
        fact = FactInput(content=content, importance=importance, **fields)
        [stored] = (await self.ok("store", facts=[fact], **scope)).stored
        assert stored.status == "added"
        return stored.id

    async def report(self, operation: str, **fields: Any) -> ConsolidationReport:
        report = (await self.ok(operation, **fields)).consolidation
        assert report is not None
        return report

    async def get(self, ids: list[str], **fields: Any) -> list[Fact]:
        return (await self.ok("get", ids=ids, **fields)).facts

    async def live(self, **fields: Any) -> set[str]:
        return {f.id for f in await self.listed(**fields)}

    def counted(self, family: str = "tg_memory_consolidated_total") -> float:
        return self.gauge(family) or 0.0


#: Paraphrases stay separate facts on store: near-duplicates merge only at 0.99 here.
fact_service = functools.partial(shared_fact_service, client=Facts, near_duplicate_threshold=0.99)


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[Facts]:
    async with fact_service(transport, registry, tmp_path, unique) as service:
        yield service


async def test_facts_merge_into_the_best_member_and_unconsolidate_restores_them_exactly(
    facts: Facts,
) -> None:
    cat0 = await facts.add(
        CAT[0], 0.3, confidence=0.6, metadata={"topic": "pets"}, source_conversation="c1"
    )
    cat1 = await facts.add(
        CAT[1],
        0.5,
        confidence=0.7,
        metadata={"source": "chat", "topic": "animals"},
        source_conversation="c2",
    )
    cat2 = await facts.add(CAT[2], 0.5, confidence=0.6, source_conversation="c3")
    important = await facts.add(CAT_IMPORTANT, 0.9)
    meeting0 = await facts.add(MEETING[0], 0.4, confidence=0.8)
    meeting1 = await facts.add(MEETING[1], 0.4)
    coffee = await facts.add(COFFEE, 0.2)
    facts.clock.advance(1)
    accessed_at = facts.clock.now
    # By meaning alone: the CAT wordings share every indexed word, so lexical ranking ties.
    hit = (await facts.ok("retrieve", query=CAT[0], top_k=1, retrieval={"mode": "dense"})).facts
    assert [f.id for f in hit] == [cat0]  # cat0 now has one access, to be summed
    ids = [cat0, cat1, cat2, important, meeting0, meeting1, coffee]
    before = await facts.get(ids)

    facts.clock.advance(10)
    merged_at = facts.clock.now
    report = await facts.report("consolidate", consolidation_id="pass-1")
    assert (report.consolidation_id, report.state, report.dry_run) == ("pass-1", "applied", False)
    assert (report.similarity_threshold, report.importance_threshold) == (0.85, 0.8)
    assert (report.candidates, report.preserved, report.merged) == (6, 1, 3)
    # The best cat fact: importance 0.5 beats 0.3, then confidence 0.7 beats 0.6.
    assert [(c.into, c.absorbed) for c in report.clusters] == [
        (cat1, [cat2, cat0]),
        (meeting0, [meeting1]),
    ]
    assert all(0.85 <= c.similarity < 1.0 for c in report.clusters)
    # Content and metadata out of the live memory, less the sources the survivor gained.
    saved = utf8(CAT[0], "topic", "pets", CAT[2]) - utf8("c3", "c1") + utf8(MEETING[1])
    assert report.bytes_saved == saved and report.complete

    assert await facts.live() == {cat1, important, meeting0, coffee}
    survivor, untouched = await facts.get([cat1, important])
    assert survivor.content == CAT[1] and survivor.source_conversation == "c2"
    assert (survivor.access_count, survivor.importance, survivor.confidence) == (1, 0.5, 0.7)
    assert survivor.last_accessed == accessed_at and survivor.updated_at == merged_at
    assert survivor.metadata == {"source": "chat", "topic": "animals"}  # its own keys win
    assert survivor.sources == ["c3", "c1"]
    assert (survivor.consolidated_from, survivor.consolidation_id) == ([cat2, cat0], "pass-1")
    assert untouched == before[3]  # high importance: never changed
    for absorbed in await facts.get([cat0, cat2]):
        assert (absorbed.superseded_by, absorbed.consolidated_into) == (cat1, cat1)
        assert absorbed.consolidation_id == "pass-1"
    history = (await facts.ok("history", fact_id=cat0)).facts
    assert [f.id for f in history] == [cat0, cat1]
    assert facts.counted() == 3

    undone = await facts.report("unconsolidate", consolidation_id="pass-1")
    assert (undone.state, undone.restored) == ("undone", 3)
    assert undone.clusters == report.clusters
    assert await facts.get(ids) == before  # ids, content, counters, times, metadata
    assert await facts.live() == set(ids)
    again = await facts.report("unconsolidate", consolidation_id="pass-1")
    assert again == undone and await facts.get(ids) == before
    assert facts.counted("tg_memory_unconsolidated_total") == 3
    # A repeated consolidate with an undone id does not merge again.
    replay = await facts.report("consolidate", consolidation_id="pass-1")
    assert replay == undone and await facts.live() == set(ids)


async def test_alike_facts_that_differ_in_a_negation_or_a_code_are_never_merged(
    facts: Facts,
) -> None:
    """Issue 11: similarity alone merged a fact into its negation, and one code word into
    another; a pass merges only what the merge guard calls the same fact."""
    texts = [
        "Alice is allergic to penicillin.",
        "Alice is not allergic to penicillin.",
        "Remember code word 0: KWccec0bx0",
        "Remember code word 1: KWccec0bx1",
    ]
    # Said of one time, the negation cannot update the other: both stay current (disputed).
    distinct = [await facts.add(text, 0.3, valid_at=1.0e9) for text in texts]
    cats = [await facts.add(text, 0.3) for text in CAT[:2]]
    # Each pair embeds alike, above the pass's threshold (0.85).
    for query, pair in ((texts[0], distinct[:2]), (texts[3], distinct[2:])):
        found = (await facts.ok("retrieve", query=query, top_k=2)).facts
        assert {f.id for f in found} == set(pair) and min(f.score or 0 for f in found) >= 0.85
    report = await facts.report("consolidate", consolidation_id="guarded")
    # Equal importance, confidence and accesses: the newer cat fact survives.
    assert [(c.into, c.absorbed) for c in report.clusters] == [(cats[1], [cats[0]])]
    assert await facts.live() == {*distinct, cats[1]}
    assert [f.content for f in await facts.get(distinct)] == texts


async def test_a_high_importance_fact_is_never_merged(facts: Facts) -> None:
    important = await facts.add(CAT_IMPORTANT, 0.8)  # at the threshold (seed 002): preserved
    low = await facts.add(CAT[0], 0.79)
    await facts.add(MEETING[0], 0.95)
    meeting = await facts.add(MEETING[1], 0.96)
    before = await facts.get([important, low])
    report = await facts.report("consolidate")
    assert (report.candidates, report.preserved, report.merged, report.clusters) == (1, 3, 0, [])
    assert report.bytes_saved == 0
    assert await facts.get([important, low]) == before
    # Only the threshold protects them: a dry run with a higher one would merge them.
    dry = await facts.report("consolidate", importance_threshold=0.99, dry_run=True)
    assert (dry.state, dry.merged, dry.preserved) == ("planned", 2, 0)
    assert {c.into for c in dry.clusters} == {important, meeting}
    assert await facts.get([important, low]) == before
    assert len(await facts.live()) == 4


async def test_dry_run_then_the_same_id_applies_once_and_a_redelivery_does_not_merge_twice(
    facts: Facts, transport: PulsarTransport, unique: str
) -> None:
    ids = [await facts.add(text, 0.4) for text in CAT]
    dry = await facts.report("consolidate", consolidation_id="p", dry_run=True)
    assert (dry.state, dry.merged) == ("planned", 2)
    assert await facts.live() == set(ids) and facts.counted() == 0
    assert await facts.error("unconsolidate", consolidation_id="p") == "not-found"

    applied = await facts.report("consolidate", consolidation_id="p")
    assert applied.state == "applied"
    assert applied.clusters == dry.clusters and applied.bytes_saved == dry.bytes_saved
    [survivor] = await facts.live()
    await facts.add(MEETING[0], 0.1)
    await facts.add(MEETING[1], 0.1)
    repeated = await facts.report("consolidate", consolidation_id="p")
    assert repeated == applied  # the first report; the new meeting facts wait for a new pass
    assert len(await facts.live()) == 3 and facts.counted() == 2
    [fact] = await facts.get([survivor])
    assert fact.access_count == 0 and fact.consolidated_from == applied.clusters[0].absorbed

    # The same bus message delivered twice (no consolidation_id: the message id names it).
    request, response = facts.topics["ws-a"]["request"], facts.topics["ws-a"]["response"]
    replies = await transport.consumer(Queue.parse(response), f"t-{unique}")
    producer = await transport.producer(Queue.parse(request))
    answers = []
    try:
        for _ in range(2):
            await producer.send(FactRequest(operation="consolidate").encode(), {"id": "m-1"})
            delivery = await asyncio.wait_for(replies.receive(), 30)
            await replies.ack(delivery)
            answers.append(FactResponse.decode(delivery.data).consolidation)
    finally:
        await producer.close()
        await replies.close()
    first, second = answers
    assert first is not None and first == second
    assert (first.consolidation_id, first.merged) == ("m-1", 1)
    assert len(await facts.live()) == 2 and facts.counted() == 3


async def test_undo_is_last_in_first_out_and_a_restated_absorbed_fact_reinforces_its_survivor(
    facts: Facts,
) -> None:
    best = await facts.add(CAT[1], 0.6)
    first = await facts.add(CAT[0], 0.3)
    await facts.ok("consolidate", consolidation_id="one")
    restated = (await facts.ok("store", facts=[FactInput(content=CAT[0])])).stored
    assert [(s.id, s.status) for s in restated] == [(best, "reinforced")]
    assert (await facts.get([best]))[0].access_count == 1

    later = await facts.add(CAT[2], 0.2)
    two = await facts.report("consolidate", consolidation_id="two")
    assert [(c.into, c.absorbed) for c in two.clusters] == [(best, [later])]
    [fact] = await facts.get([best])
    assert fact.consolidated_from == [first, later] and fact.consolidation_id == "two"

    assert await facts.error("unconsolidate", consolidation_id="one") == "conflict"
    assert await facts.live() == {best}  # the refused undo changed nothing
    assert (await facts.report("unconsolidate", consolidation_id="two")).restored == 1
    assert (await facts.report("unconsolidate", consolidation_id="one")).restored == 1
    assert await facts.live() == {best, first, later}
    [fact] = await facts.get([best])
    # The restatement after the merge stays counted; the merge's own additions are gone.
    assert fact.access_count == 1 and fact.consolidated_from == [] and fact.importance == 0.6


async def test_consolidation_never_crosses_workspaces_collections_or_users(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport, registry, tmp_path, unique, workspaces=("ws-a", "ws-b")
    ) as facts:
        shared = await facts.add(CAT[0], 0.3)
        alice = [await facts.add(text, 0.3, user="alice") for text in CAT[1:]]
        bob = await facts.add(CAT[1], 0.3, user="bob")
        other = [await facts.add(text, 0.3, collection="c2") for text in CAT[:2]]
        elsewhere = [await facts.add(text, 0.3, workspace="ws-b") for text in CAT[:2]]

        assert (await facts.report("consolidate", user="bob")).merged == 0
        # Without a user, a pass reads the shared facts alone, never a user's.
        nobody = await facts.report("consolidate", consolidation_id="x")
        assert (nobody.candidates, nobody.merged) == (1, 0)
        report = await facts.report("consolidate", consolidation_id="x", user="alice")
        assert report.candidates == 2
        # Only Alice's two facts merge: the user-less and Bob's are no one else's.
        assert [sorted([c.into, *c.absorbed]) for c in report.clusters] == [sorted(alice)]
        assert await facts.live() == {shared}
        assert await facts.live(user="bob") == {bob}
        assert await facts.live(user="alice") == {report.clusters[0].into}
        assert await facts.live(collection="c2") == set(other)
        assert await facts.live(workspace="ws-b") == set(elsewhere)
        # The pass is known only where it ran.
        assert await facts.error("unconsolidate", consolidation_id="x", workspace="ws-b") == (
            "not-found"
        )
        assert await facts.error("unconsolidate", consolidation_id="x", collection="c2") == (
            "not-found"
        )
        ws_b = await facts.report("consolidate", consolidation_id="x", workspace="ws-b")
        assert ws_b.merged == 1
        # Alice's pass is hers: undoing "x" without a user finds the empty shared pass.
        assert (await facts.report("unconsolidate", consolidation_id="x")).restored == 0
        assert await facts.live(user="alice") == {report.clusters[0].into}
        undone = await facts.report("unconsolidate", consolidation_id="x", user="alice")
        assert undone.restored == 1
        assert await facts.live(user="alice") == set(alice)
        assert len(await facts.live(workspace="ws-b")) == 1


async def test_bad_consolidation_requests_are_answered_and_write_nothing(facts: Facts) -> None:
    ids = [await facts.add(text, 0.3) for text in CAT]
    assert await facts.error("unconsolidate") == "bad-request"
    assert await facts.error("unconsolidate", consolidation_id="never") == "not-found"
    assert await facts.error("consolidate", consolidation_id="x" * 300) == "bad-request"
    client = facts.running.clients["ws-a"]
    for body in (
        {"operation": "consolidate", "similarity_threshold": 1.5},
        {"operation": "consolidate", "importance_threshold": 0},
        {"operation": "consolidate", "dry_run": "maybe"},
    ):
        reply = await client.request(Raw(body=body))  # type: ignore[arg-type]
        assert reply.error is not None and reply.error.type == "invalid", body
    assert await facts.live() == set(ids) and facts.counted() == 0
    # A purge of the collection forgets its passes too.
    assert (await facts.report("consolidate", consolidation_id="z")).merged == 2
    assert (await facts.ok("purge")).deleted == 3
    assert await facts.error("unconsolidate", consolidation_id="z") == "not-found"


async def test_scheduled_consolidation_merges_and_expires_the_absorbed_history(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        sweep_interval=0.05,
        consolidation_interval=0.1,
        consolidation_history_ttl=60,
    ) as facts:
        best = await facts.add(CAT[1], 0.5)
        absorbed = await facts.add(CAT[0], 0.3)
        kept = await facts.add(COFFEE, 0.3)
        await eventually(lambda: facts.counted() == 1, timeout=20)
        assert await facts.live() == {best, kept}
        [fact] = await facts.get([absorbed])
        assert fact.consolidated_into == best and fact.consolidation_id
        assert fact.consolidation_id.startswith("scheduled-")
        # A pass may run between the second and the third store, a clock second apart.
        assert facts.clock.now - 1 <= fact.expires_at - 60 <= facts.clock.now
        facts.clock.advance(61)  # the history expires and is swept; the survivor stays
        gauge = {"processor": facts.running.processor.id, "kind": "fact"}
        await eventually(lambda: registry.get_sample_value("tg_memory_items", gauge) == 2)
        assert (await facts.ok("get", ids=[absorbed, best])).missing == [absorbed]


# -- episodes --------------------------------------------------------------------------
EpisodeService = Running[EpisodeMemoryProcessor, EpisodeRequest, EpisodeResponse]
STEPS = [AgentStep(thought="look up the rate", action="search", observation="timeout")]


@contextlib.asynccontextmanager
async def episode_service(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[tuple[EpisodeService, MovableClock]]:
    clock = MovableClock()
    async with serving(
        EpisodeMemoryProcessor,
        EpisodeResponse,
        transport,
        pid=f"episode-memory-{unique}",
        queues={"default": topics("episode-memory", unique, "default")},
        data_dir=tmp_path / "episodes",
        registry=registry,
        clock=clock,
    ) as running:
        yield running, clock


async def episode(
    service: EpisodeService,
    clock: MovableClock,
    goal: str,
    outcome: Outcome,
    score: float,
    lessons: list[str],
    **fields: Any,
) -> str:
    clock.advance(1)
    request = EpisodeRequest(
        operation="store",
        goal=goal,
        outcome=outcome,
        score=score,
        lessons=lessons,
        steps=STEPS,
        session_id=f"s-{goal}-{outcome}-{fields.get('user')}",
        **fields,
    )
    response = await episode_ok(service, request)
    assert response.created and response.id
    return response.id


async def episode_ok(service: EpisodeService, request: EpisodeRequest) -> EpisodeResponse:
    response = await service.ask(request)
    assert response.error is None, response.error
    return response


async def episode_report(service: EpisodeService, request: EpisodeRequest) -> ConsolidationReport:
    report = (await episode_ok(service, request)).consolidation
    assert report is not None
    return report


async def episodes_by_id(service: EpisodeService, ids: list[str], **fields: Any) -> list[Episode]:
    request = EpisodeRequest(operation="get", ids=ids, **fields)
    return (await episode_ok(service, request)).episodes


async def live_episodes(service: EpisodeService, **fields: Any) -> set[str]:
    request = EpisodeRequest(operation="list", limit=200, **fields)
    return {e.id for e in (await episode_ok(service, request)).episodes}


async def test_episodes_merge_by_outcome_keep_lessons_and_unconsolidate_restores_them(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(transport, registry, tmp_path, unique) as (service, clock):
        timed_out = "the rate API timed out"
        best = await episode(
            service, clock, "convert 100 euros to dollars", "failure", 0.3, [timed_out]
        )
        cached = await episode(
            service,
            clock,
            "convert one hundred euros to US dollars",
            "failure",
            0.2,
            [timed_out, "use a cached rate"],
        )
        short = await episode(
            service, clock, "Convert 100 EUR to USD", "failure", 0.0, ["The rate API  timed out"]
        )
        partial = await episode(
            service,
            clock,
            "convert 100 euros to dollars",
            "partial",
            0.5,
            ["the currency API timed out"],
        )
        success = await episode(
            service, clock, "convert 100 euros to dollars", "success", 1.0, ["check the rate first"]
        )
        anns = await episode(
            service, clock, "convert 100 euros to dollars", "failure", 0.0, [timed_out], user="ann"
        )
        ids = [best, cached, short, partial, success]  # the shared episodes; anns is ann's
        before = await episodes_by_id(service, ids)
        anns_before = await episodes_by_id(service, [anns], user="ann")

        request = EpisodeRequest(operation="consolidate", consolidation_id="e-1")
        report = await episode_report(service, request)
        assert report.state == "applied"
        assert (report.candidates, report.preserved, report.merged) == (4, 1, 2)
        assert [(c.into, c.absorbed) for c in report.clusters] == [(best, [cached, short])]
        merged, *_ = await episodes_by_id(service, [best])
        # Lessons unioned (a repeat in other spacing or case is one lesson); goal and steps kept.
        assert merged.lessons == [timed_out, "use a cached rate"]
        assert (merged.goal, merged.steps, merged.score) == (before[0].goal, STEPS, 0.3)
        assert merged.consolidated_from == [cached, short] and merged.consolidation_id == "e-1"
        old = {e.id: e for e in before}
        saved = sum(canonical_size(old[i].model_dump(mode="json")) for i in (cached, short))
        saved -= len(',"use a cached rate"')  # the lesson the survivor gained, as JSON
        assert report.bytes_saved == saved

        assert await live_episodes(service) == {best, partial, success}
        found = await episode_ok(
            service, EpisodeRequest(operation="retrieve", goal="convert euros to dollars", top_k=10)
        )
        assert {e.id for e in found.episodes} == {best, partial, success}
        absorbed = await episodes_by_id(service, [cached, short])
        assert [(e.consolidated_into, e.consolidation_id) for e in absorbed] == [(best, "e-1")] * 2
        assert (await episodes_by_id(service, [success, partial])) == [old[success], old[partial]]
        assert await episodes_by_id(service, [anns], user="ann") == anns_before  # not hers
        again = await episode_ok(service, request)  # a repeated request: the same report
        assert again.consolidation == report
        counted = {"processor": service.processor.id, "kind": "episode"}
        assert registry.get_sample_value("tg_memory_consolidated_total", counted) == 2

        undo = EpisodeRequest(operation="unconsolidate", consolidation_id="e-1")
        undone = await episode_report(service, undo)
        assert (undone.state, undone.restored) == ("undone", 2)
        assert await episodes_by_id(service, ids) == before
        assert await live_episodes(service) == set(ids)
        assert await live_episodes(service, user="ann") == {anns}


async def test_a_stored_again_survivor_keeps_its_lineage_and_bad_requests_are_refused(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with episode_service(transport, registry, tmp_path, unique) as (service, clock):
        goal = "convert 100 euros to dollars"
        best = await episode(service, clock, goal, "failure", 0.3, ["the rate API timed out"])
        other = await episode(
            service,
            clock,
            "Convert 100 EUR to USD",
            "failure",
            0.0,
            ["the rate API timed out", "try a cached rate"],
        )
        # Their texts are ≈0.85 alike (by backend); this test is about lineage, not the bar.
        request = EpisodeRequest(
            operation="consolidate", consolidation_id="e-2", similarity_threshold=0.8
        )
        assert (await episode_report(service, request)).merged == 1
        # The survivor's session stores a new version: its own lessons, plus the merged one.
        stored = EpisodeRequest(
            operation="store",
            goal=goal,
            outcome="failure",
            score=0.3,
            steps=STEPS,
            lessons=["the rate API timed out", "add a timeout"],
            session_id=f"s-{goal}-failure-None",
        )
        assert (await episode_ok(service, stored)).id == best
        [survivor] = await episodes_by_id(service, [best])
        assert survivor.lessons == ["the rate API timed out", "add a timeout", "try a cached rate"]
        assert survivor.consolidated_from == [other]
        undo = EpisodeRequest(operation="unconsolidate", consolidation_id="e-2")
        assert (await episode_report(service, undo)).restored == 1
        [survivor] = await episodes_by_id(service, [best])
        assert survivor.lessons == ["the rate API timed out", "add a timeout"]
        assert await live_episodes(service) == {best, other}

        bad: list[tuple[dict[str, Any], str]] = [
            ({"operation": "unconsolidate"}, "bad-request"),
            ({"operation": "unconsolidate", "consolidation_id": "nope"}, "not-found"),
            ({"operation": "consolidate", "similarity_threshold": 0}, "invalid"),
            ({"operation": "consolidate", "importance_threshold": 2}, "invalid"),
            ({"operation": "consolidate", "consolidation_id": "y" * 257}, "bad-request"),
        ]
        client = service.clients["default"]
        for body, kind in bad:
            reply = await client.request(Raw(body=body))  # type: ignore[arg-type]
            assert reply.error is not None and reply.error.type == kind, (body, reply.error)
        assert await live_episodes(service) == {best, other}


async def test_the_fact_client_consolidates_and_undoes_a_pass(facts: Facts) -> None:
    """The typed client's consolidate / unconsolidate (shared by the fact and episode
    clients) against the real service: a dry run changes nothing, a pass merges, the undo
    restores every fact."""
    for text in CAT:
        await facts.add(text, 0.5)
    before = await facts.live()
    client = FactClient(facts.running.clients["ws-a"])
    scope = Scope("ws-a", "default")

    planned = await client.consolidate(scope, dry_run=True)
    assert (planned.state, planned.merged) == ("planned", 2) and await facts.live() == before

    applied = await client.consolidate(scope, consolidation_id="p1")
    assert (applied.state, applied.merged) == ("applied", 2)
    assert len(await facts.live()) == 1

    undone = await client.unconsolidate(scope, "p1")
    assert undone.state == "undone" and await facts.live() == before
