"""Updates supersede, over the real bus: a new fact that changes what a stored one says about
the same subject and attribute makes it history (kept, out of recall); a contradiction with
nothing to tell which is current keeps both, marked."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.slots import read, replaces
from memory_services.store.base import Scope
from react_mem.agent.items import fact_items
from react_mem.bus.pulsar import PulsarTransport
from react_mem.errors import RequestTimeout
from react_mem.learner.changes import judge
from react_mem.learner.llm import JsonLLM
from react_mem.schema import TextCompletionRequest, TextCompletionResponse
from react_mem.schema.facts import Fact, FactInput
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service
from tests.support.memory_services import START, until

pytestmark = pytest.mark.broker

YEAR = 365 * 86_400.0
fact_service = functools.partial(
    shared_fact_service, client=FactService, embedder=HashingEmbedder()
)


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[FactService]:
    async with fact_service(transport, registry, tmp_path, unique) as service:
        yield service


async def current(facts: FactService, query: str, **fields: object) -> list[str]:
    found = (await facts.ok("retrieve", query=query, top_k=10, **fields)).facts
    return [f.content for f in found]


async def test_not_any_more_supersedes_and_both_stay_in_the_history(facts: FactService) -> None:
    [allergic] = await facts.store("I am allergic to peanuts.", user="ann")
    facts.clock.now = START + 60
    stored = (
        await facts.ok(
            "store", facts=[FactInput(content="I am not allergic to peanuts any more.")], user="ann"
        )
    ).stored
    [cured] = stored
    assert cured.status == "added" and cured.superseded == [allergic]
    assert await current(facts, "Am I allergic to peanuts?", user="ann") == [
        "I am not allergic to peanuts any more."
    ]
    history = (await facts.ok("history", fact_id=cured.id, user="ann")).facts
    assert [f.content for f in history] == [
        "I am allergic to peanuts.",
        "I am not allergic to peanuts any more.",
    ]
    old = history[0]
    assert (old.superseded_by, old.valid_until) == (cured.id, START + 60)
    assert [f.id for f in await facts.listed(user="ann")] == [cured.id]


async def test_the_value_valid_latest_wins_whatever_order_it_was_told_in(
    facts: FactService,
) -> None:
    def told(content: str, year: int) -> FactInput:
        return FactInput(content=content, valid_at=START + (year - 2020) * YEAR)

    [berlin] = (await facts.ok("store", facts=[told("I live in Berlin.", 2021)])).stored
    [lisbon] = (await facts.ok("store", facts=[told("I moved to Lisbon.", 2024)])).stored
    assert lisbon.superseded == [berlin.id]
    [paris] = (await facts.ok("store", facts=[told("I live in Paris now.", 2023)])).stored
    assert paris.superseded == [paris.id]  # told late: history at once
    assert await current(facts, "Where do I live?") == ["I moved to Lisbon."]
    assert (await facts.one(paris.id)).superseded_by == lisbon.id
    # Someone else's residence is another slot; another owner's facts are never touched.
    await facts.store("Omar lives in Cairo.", "I live in Oslo.", user="omar")
    assert await current(facts, "Where do I live?") == ["I moved to Lisbon."]


async def test_a_contradiction_with_no_order_keeps_both_marked(facts: FactService) -> None:
    yes, no = await facts.store("I am allergic to shellfish.", "I am not allergic to shellfish.")
    got = {f.id: f for f in (await facts.ok("get", ids=[yes, no])).facts}
    assert got[yes].conflicts_with == [no] and got[no].conflicts_with == [yes]
    assert got[yes].superseded_by is None and got[no].superseded_by is None
    assert sorted(await current(facts, "allergic to shellfish?")) == [
        "I am allergic to shellfish.",
        "I am not allergic to shellfish.",
    ]


async def test_facts_that_can_hold_together_are_left_alone(facts: FactService) -> None:
    ids = await facts.store("I have a dog named Rex.", "I am allergic to cats.")
    facts.clock.now = START + 60
    ids += await facts.store("I have a cat named Tom.", "I am allergic to pollen.")
    ids += await facts.store("I used to live in Rome.", "Omar lives in Cairo.")
    assert sorted(f.id for f in await facts.listed()) == sorted(ids)
    facts.clock.now = START + 120
    [now] = (
        await facts.ok("store", facts=[FactInput(content="I now have a parrot named Kiwi.")])
    ).stored
    assert sorted(now.superseded) == sorted(ids[:1] + ids[2:3])  # "now": the pets are history


@pytest.mark.parametrize(
    ("earlier", "later", "updates"),
    [
        ("I live in Berlin", "The user now lives in Paris", True),
        ("I live in Paris", "I don't live in Paris any more", True),
        ("I live in Berlin", "I don't live in Paris", False),
        ("I work at Acme", "I joined Globex in 2024", True),
        ("I am vegetarian", "I am vegan now", True),
        ("My wife is Anna", "My wife is Anna.", False),
        ("I am allergic to peanuts", "I am allergic to shellfish", None),
        ("Alice lives in Rome", "Bob lives in Oslo", None),
        ("My favourite colour is blue", "My favorite colour is green", True),
        ("My sister is a doctor", "My sister is in Paris", None),
        ("I'm based in Berlin", "I'm based in Oslo now", True),
        ("The user is allergic to cats", "The user isn't allergic to cats anymore", True),
    ],
)
def test_what_the_rules_read(earlier: str, later: str, updates: bool | None) -> None:
    old, new = read(earlier), read(later)
    if updates is None:
        assert old is None or new is None or replaces(new, old) is None
    else:
        assert old is not None and new is not None
        assert replaces(new, old) is updates


@pytest.mark.parametrize(
    "text", ["I used to live in Rome", "It is raining", "Where do I live?", "The weather is nice"]
)
def test_what_the_rules_do_not_read(text: str) -> None:
    assert read(text) is None


async def test_a_question_about_a_past_time_finds_the_value_that_held_then(
    facts: FactService,
) -> None:
    def at(year: int) -> float:
        return datetime(year, 3, 1, tzinfo=UTC).timestamp()

    facts.clock.now = at(2025)
    chain = [
        ("I live in Berlin.", 2021),
        ("I live in Paris now.", 2023),
        ("I moved to Lisbon.", 2024),
    ]
    for content, year in chain:
        await facts.ok("store", facts=[FactInput(content=content, valid_at=at(year))])
    asked = (await facts.ok("retrieve", query="Where did I live in 2023?", top_k=3)).facts
    assert asked[0].content == "I live in Paris now."
    assert asked[0].superseded_by is not None and asked[0].valid_until == at(2024)
    # Berlin held until 2023-03-01: within 2023 too, but after Paris, which held longer.
    assert asked[1].content == "I live in Berlin."
    before = (await facts.ok("retrieve", query="Where did I live before?", top_k=4)).facts
    assert before[0].content == "I moved to Lisbon."
    assert {f.content for f in before[1:]} == {"I live in Berlin.", "I live in Paris now."}
    assert await current(facts, "Where do I live?") == ["I moved to Lisbon."]
    lines = [item.text for item in fact_items(asked)]
    assert lines[0] == "- earlier (until 2024-03-01): (2023-03-01) I live in Paris now."


def test_a_disputed_fact_is_marked_in_the_prompt() -> None:
    fact = Fact(id="a", content="I am allergic to shellfish.", conflicts_with=["b"])
    assert [i.text for i in fact_items([fact])] == ["- disputed: I am allergic to shellfish."]


async def test_what_the_writer_judged_supersedes_or_marks_where_no_rule_reads(
    facts: FactService,
) -> None:
    [berlin, tea] = await facts.store("I'm based in Berlin.", "Ada takes tea without milk.")
    facts.clock.now = START + 60
    home = FactInput(content="Home is Lisbon these days.", updates=[berlin])
    milk = FactInput(content="Ada takes milk in her tea.", contradicts=[tea])
    stored = (await facts.ok("store", facts=[home, milk])).stored
    assert stored[0].superseded == [berlin] and stored[1].conflicts_with == [tea]
    assert (await facts.one(berlin)).superseded_by == stored[0].id
    assert (await facts.one(tea)).conflicts_with == [stored[1].id]
    # A bad id refuses the whole request before anything is written.
    bad = FactInput(content="Ada now lives in Porto.", updates=["not-an-id"])
    assert await facts.error("store", facts=[bad]) == "bad-id"
    assert len(await facts.listed()) == 3


def _llm(reply: dict[str, object] | None) -> JsonLLM:
    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        if reply is None:
            raise RequestTimeout("no answer")
        assert "STORED facts:" in request.prompt and "s1: I live in Berlin." in request.prompt
        return TextCompletionResponse(response=json.dumps(reply))

    return JsonLLM(complete, attempts=1)


async def test_the_learner_passes_on_what_the_llm_judged() -> None:
    new = [FactInput(content="Home is Lisbon now."), FactInput(content="Ada likes tea.")]
    stored = [[Fact(id="id-berlin", content="I live in Berlin.")], []]
    said = {
        "judgements": [
            {"new": "n1", "updates": ["s1", "s9"], "contradicts": []},  # s9 was never shown
            {"new": "n7", "updates": ["s1"]},  # no such new fact
            "junk",
        ]
    }
    judged = await judge(_llm(said), new, stored)
    assert [f.updates for f in judged] == [["id-berlin"], []]
    assert [f.contradicts for f in judged] == [[], []]
    for unusable in (None, {"judgements": "no"}):  # down, or a reply of the wrong shape
        assert await judge(_llm(unusable), new, stored) == new
    assert await judge(None, new, stored) == new


async def test_a_value_told_again_later_is_current_again(facts: FactService) -> None:
    def at(year: int) -> FactInput:
        return FactInput(
            content="I am not allergic to cats any more." if year % 2 else "I am allergic to cats.",
            valid_at=START + (year - 2020) * YEAR,
        )

    ids = [(await facts.ok("store", facts=[at(year)])).stored[0].id for year in (2020, 2021, 2022)]
    assert await current(facts, "Am I allergic to cats?") == ["I am allergic to cats."]
    again = (await facts.ok("store", facts=[at(2023)])).stored[0]
    assert again.id == ids[1] and again.superseded == [ids[0]]  # the same record, current again
    assert await current(facts, "Am I allergic to cats?") == ["I am not allergic to cats any more."]
    # Told again with no time, or with an earlier one, it stays as it is.
    stale = FactInput(content="I am allergic to cats.", valid_at=START)
    assert (await facts.ok("store", facts=[stale])).stored[0].status == "superseded"


async def test_facts_stored_before_slots_get_theirs_and_are_superseded(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    """A store written before the slot key existed: the next service to open it fills the
    key in (its first sweep), and a later update supersedes those facts too."""
    owner = Scope("ws-a", "default")
    async with fact_service(transport, CollectorRegistry(), tmp_path, unique) as old:
        [berlin, hiking] = await old.store("I live in Berlin.", "I enjoy hiking.")
        ctx = old.processor.memory.ctx
        for id in (berlin, hiking):  # as written before the key existed
            await ctx.store.set_payload(ctx.collection, [id], {"slot": None}, scope=owner)
    async with fact_service(transport, CollectorRegistry(), tmp_path, unique) as new:
        ctx = new.processor.memory.ctx

        async def filled() -> bool:
            records = await ctx.get([berlin, hiking], owner)
            return {r.id: r.payload.get("slot") for r in records} == {
                berlin: "self|residence",
                hiking: "",
            }

        await until(filled)
        new.clock.now = START + 60
        [moved] = (await new.ok("store", facts=[FactInput(content="I moved to Oslo.")])).stored
        assert moved.superseded == [berlin]
