"""Updates in the many ways people word them: the slot rules read a change told in another
tense, without its "I", the other way round or with another common verb, and leave other
people's news and values that can hold together alone; over the real bus, a chain told that
way keeps only its latest value current, the earlier ones in its history."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.facts.slots import RULES_VERSION, read, replaces
from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FactInput
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service
from tests.support.memory_services import until

fact_service = functools.partial(
    shared_fact_service, client=FactService, embedder=HashingEmbedder()
)


def at(year: int) -> float:
    return datetime(year, 3, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("I reside in Porto.", "We've just moved to Turin."),
        ("Home is Oslo.", "Madrid is my home now."),
        ("I call Dublin home.", "Now living in Warsaw."),
        ("I've been living in Athens for years.", "I sold the flat and relocated to Vienna."),
        ("I have a job at Acme.", "I was hired by Hooli."),
        ("I'm working for Initech.", "Started a new job at Stark."),
        ("I'm a designer at Wayne.", "I accepted an offer from Soylent."),
        ("I work at Acme.", "I changed jobs, I'm at Globex now."),
        ("I eat a vegan diet.", "I've gone vegetarian."),
        ("I'm on a keto diet.", "I turned pescatarian last year."),
        ("I have an allergy to pollen.", "My pollen allergy went away."),
        ("I outgrew my gluten allergy.", "My gluten allergy is back."),
        ("I own a cat named Tom.", "These days my pet is a parrot named Kiwi."),
        ("Chloe is my girlfriend.", "Ben and I got married."),
        ("I'm in a relationship with Iris.", "I've been seeing Hugo lately."),
    ],
)
def test_a_change_in_other_words_updates_the_same_slot(earlier: str, later: str) -> None:
    old, new = read(earlier), read(later)
    assert old is not None and new is not None, (old, new)
    assert old.subject == new.subject == "self"
    assert replaces(new, old) is True


@pytest.mark.parametrize(
    ("earlier", "later", "updates"),
    [
        ("I live in Berlin.", "My sister just moved to Paris.", None),
        ("I work at Acme.", "My colleague Sam got a job at Globex.", None),
        ("I am vegan.", "My brother has gone keto.", None),
        ("I am allergic to cats.", "My friend Lea is allergic to cats.", None),
        ("I am allergic to cats.", "I developed a pollen allergy.", None),
        ("I have a dog named Rex.", "We got a cat named Tom.", False),  # two pets
        ("I live in Berlin.", "I have been living in Berlin for years.", False),
    ],
)
def test_other_peoples_news_and_values_that_hold_together_are_apart(
    earlier: str, later: str, updates: bool | None
) -> None:
    old, new = read(earlier), read(later)
    assert old is not None
    assert (None if new is None else replaces(new, old)) is updates


OTHERS = ["my sister", "my colleague Sam", "my friend Lea", "my dad", "our neighbour", "Sam", "she"]
NEWS = [
    "just moved to {v}", "lives in {v} now", "has relocated to {v}", "got a job at {v}",
    "works for {v} these days", "was hired by {v}", "has gone vegan", "is allergic to {v}",
    "outgrew the {v} allergy", "adopted a dog named {v}", "is dating {v}", "married {v}",
    "is now based in {v}", "is engaged to {v}", "broke up with {v}", "isn't allergic to {v} any longer",
    "moved from Rome to {v}", "'s in {v} now", "ended up moving to {v}", "'s been dating {v}",
    "rents a flat in {v}",
]  # fmt: skip


#: Read by the third rules, not by the second: clauses read apart, "'s" and "n't" spelled
#: out, relative time phrases, catenatives, break-ups, dwellings and inverted forms.
THIRD = [
    # (earlier, later, the later's value: "-" a negation, "" an allergy's)
    ("I live in Porto.", "I don't live in Porto any more; I'm in Turin now.", "turin"),
    ("I live in Porto.", "Moved from Porto to Turin two months ago.", "turin"),
    ("My flat's in Oslo.", "As of this spring we live in Madrid.", "madrid"),
    ("I rent an apartment in Athens.", "Vienna is where I live these days.", "vienna"),
    ("I've lived in Dublin for ten years.", "I ended up relocating to Prague.", "prague"),
    ("I've worked for Acme for five years.", "Hooli hired me.", "hooli"),
    ("I work as a nurse at Initech.", "I've taken a role at Stark.", "stark"),
    ("My job's at Wayne.", "I left Wayne and I work for Soylent now.", "soylent"),
    ("I work at Acme.", "I've been at Initech since the spring.", "initech"),
    ("I've been vegan for ages.", "I'm not vegan any longer, I eat keto.", "keto"),
    ("I'm pescatarian.", "As of last year I'm not pescatarian.", "-"),
    ("I'm on keto.", "I changed my diet to paleo.", "paleo"),
    ("I can't eat shellfish, I'm allergic.", "The shellfish allergy has cleared up.", "-"),
    ("I don't have the pollen allergy any longer.", "The pollen allergy has returned.", ""),
    ("I'm not allergic to cats any longer.", "I'm allergic to cats once more.", ""),
    ("Anna's my girlfriend.", "Anna and I split up. I'm seeing Chloe now.", "chloe"),
    ("I'm dating Hugo.", "I broke up with Hugo.", "-"),
    ("I date Iris.", "I've got a new boyfriend, Felix.", "felix"),
    ("Grace and I have been together for years.", "I'm married to Daniel now.", "daniel"),
]


@pytest.mark.parametrize(("earlier", "later", "value"), THIRD)
def test_the_third_rules_read_changes_told_as_people_type_them(
    earlier: str, later: str, value: str
) -> None:
    old, new = read(earlier), read(later)
    assert old is not None and new is not None, (old, new)
    assert old.subject == new.subject == "self" and old.key == new.key
    assert new.negative is (value == "-") and (value == "-" or new.value == value), new
    assert replaces(new, old) is True


@pytest.mark.parametrize(
    ("text", "key", "value", "negative"),
    [
        # The clause that says what holds wins over the one that says what no longer does.
        ("I'm not in Paris anymore, I moved to Berlin.", "self|residence", "berlin", False),
        ("I live in Berlin, not Paris.", "self|residence", "berlin", False),
        ("I used to live in Rome, now I live in Oslo.", "self|residence", "oslo", False),
        ("I stopped being vegan and went keto.", "self|diet", "keto", False),
        # Another attribute's negation is not given up for it.
        ("I'm not allergic to nuts any more but I am allergic to cats.", "self|allergy:nut", "",
         True),
        # A visit is no home; "the gym" is nobody's employer.
        ("I live in Berlin but I'm in Paris this week for a conference.", "self|residence",
         "berlin", False),
        ("I'm at the gym, I work at Acme.", "self|employer", "acme", False),
        ("I'm in Berlin right now, but I live in Oslo.", "self|residence", "oslo", False),
        ("Anna and I broke up.", "self|partner", "anna", True),
    ],
)  # fmt: skip
def test_each_clause_is_read_with_its_own_negation(
    text: str, key: str, value: str, negative: bool
) -> None:
    slot = read(text)
    assert slot is not None and (slot.key, slot.value, slot.negative) == (key, value, negative)


@pytest.mark.parametrize(
    "text",
    [
        "It's my birthday.",
        "The company hired me.",
        "I'd love to live in Oslo one day.",
        "I'm thinking of moving to Oslo.",
        "I'm in Paris now.",
        "I'm at Globex now.",
        "Seeing the sun set over Oslo made me happy.",
        "I joined a book club.",
        "I joined in.",
        "My team is like a second family.",
        "I left Acme.",
        "I've lived in Rome.",
        "Here's the flat I designed.",
        "I've been at the hospital since Monday.",
    ],
)
def test_what_says_no_value_of_the_users_stays_unread(text: str) -> None:
    assert read(text) is None


@given(
    who=st.sampled_from(OTHERS),
    news=st.sampled_from(NEWS),
    value=st.sampled_from(["Porto", "Acme", "Anna", "peanuts"]),
    cue=st.sampled_from(["", "These days, ", "So "]),
)
def test_other_peoples_news_never_fills_a_slot_of_the_users(
    who: str, news: str, value: str, cue: str
) -> None:
    slot = read(f"{cue}{who} {news.format(v=value)}.")
    assert slot is None or slot.subject != "self"


@pytest.mark.parametrize(
    "text",
    ["I was married to Anna.", "I used to work at Acme.", "I work in Berlin.", "I'm with you."],
)
def test_history_and_what_names_no_slot_are_not_read(text: str) -> None:
    assert read(text) is None


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[FactService]:
    async with fact_service(transport, registry, tmp_path, unique) as service:
        yield service


@pytest.mark.broker
async def test_a_chain_in_other_words_keeps_only_the_latest_value_current(
    facts: FactService,
) -> None:
    facts.clock.now = at(2025)
    told = [
        ("I reside in Porto.", 2019),
        ("We've just moved to Turin.", 2020),
        ("My sister just moved to Oslo.", 2021),
        ("Madrid is my home now.", 2022),
        ("Now living in Warsaw.", 2023),
    ]
    ids = []
    for content, year in told:
        stored = await facts.ok("store", facts=[FactInput(content=content, valid_at=at(year))])
        ids.append(stored.stored[0].id)
    found = (await facts.ok("retrieve", query="Where do I live?", top_k=5)).facts
    assert found[0].content == "Now living in Warsaw."
    mine = {"I reside in Porto.", "We've just moved to Turin.", "Madrid is my home now."}
    assert not mine & {f.content for f in found}  # the earlier values stay out of the prompt
    history = (await facts.ok("history", fact_id=ids[-1])).facts
    assert [f.content for f in history] == [
        "I reside in Porto.",
        "We've just moved to Turin.",
        "Madrid is my home now.",
        "Now living in Warsaw.",
    ]
    assert (await facts.one(ids[2])).superseded_by is None  # the sister's move is hers


@pytest.mark.broker
async def test_of_two_values_that_hold_together_the_latest_is_first(facts: FactService) -> None:
    facts.clock.now = at(2025)
    for content, year in [("I have a pet dog named Rex.", 2020), ("We got a cat named Tom.", 2022)]:
        await facts.ok("store", facts=[FactInput(content=content, valid_at=at(year))])
    found = (await facts.ok("retrieve", query="What pet do I have?", top_k=5)).facts
    assert [f.content for f in found[:2]] == [
        "We got a cat named Tom.",
        "I have a pet dog named Rex.",
    ]
    assert all(f.superseded_by is None for f in found)  # both pets are current


@pytest.mark.broker
async def test_facts_older_rules_could_not_read_are_read_again(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    owner = Scope("ws-a", "default")
    async with fact_service(transport, CollectorRegistry(), tmp_path, unique) as old:
        [madrid, hiking] = await old.store("Madrid is my home.", "I enjoy hiking.")
        ctx = old.processor.memory.ctx
        for id in (madrid, hiking):  # as the first rules left them: read by none
            await ctx.store.set_payload(
                ctx.collection, [id], {"slot": "", "slot_rules": None}, scope=owner
            )
    async with fact_service(transport, CollectorRegistry(), tmp_path, unique) as new:
        ctx = new.processor.memory.ctx

        async def filled() -> bool:
            records = await ctx.get([madrid, hiking], owner)
            return {r.id: r.payload.get("slot") for r in records} == {
                madrid: "self|residence",
                hiking: "",
            }

        await until(filled)
        new.clock.now += 60
        [moved] = (await new.ok("store", facts=[FactInput(content="I moved to Oslo.")])).stored
        assert moved.superseded == [madrid]


@pytest.mark.broker
async def test_a_judged_update_of_a_fact_the_rules_read_as_another_thing_is_not_applied(
    facts: FactService,
) -> None:
    [berlin, acme, peanuts] = await facts.store(
        "I live in Berlin.", "I work at Acme.", "I am allergic to peanuts."
    )
    facts.clock.now += 60
    # A small model's word: the move "updates" the job and "contradicts" the allergy.
    moved = FactInput(content="I moved to Oslo.", updates=[acme], contradicts=[peanuts])
    [stored] = (await facts.ok("store", facts=[moved])).stored
    assert stored.superseded == [berlin]  # the rule's own reading still applies
    assert not stored.conflicts_with
    for id in (acme, peanuts):
        fact = await facts.one(id)
        assert fact.superseded_by is None and not fact.conflicts_with


@pytest.mark.broker
async def test_facts_an_older_version_of_the_rules_read_are_read_again(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    owner = Scope("ws-a", "default")
    async with fact_service(transport, CollectorRegistry(), tmp_path, unique) as old:
        [flat, job, hiking] = await old.store(
            "My flat's in Madrid.", "My job's at Acme.", "I enjoy hiking."
        )
        ctx = old.processor.memory.ctx
        before = RULES_VERSION - 1  # as the previous version left them
        for id, slot in ((flat, ""), (job, "self|job"), (hiking, "")):
            await ctx.store.set_payload(
                ctx.collection, [id], {"slot": slot, "slot_rules": before}, scope=owner
            )
    async with fact_service(transport, CollectorRegistry(), tmp_path, unique) as new:
        ctx = new.processor.memory.ctx

        async def read_again() -> bool:
            records = await ctx.get([flat, job, hiking], owner)
            return {
                r.id: (r.payload.get("slot"), r.payload.get("slot_rules")) for r in records
            } == {
                flat: ("self|residence", RULES_VERSION),
                job: ("self|employer", RULES_VERSION),
                hiking: ("", RULES_VERSION),
            }

        await until(read_again)
        new.clock.now += 60
        told = [FactInput(content="I'm not in Madrid any more, I moved to Oslo.")]
        [moved] = (await new.ok("store", facts=told)).stored
        assert moved.superseded == [flat]
        new.clock.now += 60
        [hired] = (await new.ok("store", facts=[FactInput(content="Hooli hired me.")])).stored
        assert hired.superseded == [job]


@pytest.mark.broker
async def test_a_chain_told_as_people_type_it_keeps_only_the_latest_value_current(
    facts: FactService,
) -> None:
    facts.clock.now = at(2025)
    told = [
        ("I've been with Acme for years, I'm a tester there.", 2018),  # read by no rule
        ("My job's at Initech.", 2019),
        ("I left Initech and I work for Hooli now.", 2020),
        ("My friend Sam isn't at Hooli any longer, Stark hired him.", 2021),
        ("As of last month I've taken a position at Wayne.", 2022),
    ]
    ids = []
    for content, year in told:
        stored = await facts.ok("store", facts=[FactInput(content=content, valid_at=at(year))])
        ids.append(stored.stored[0].id)
    found = (await facts.ok("retrieve", query="Who do I work for?", top_k=5)).facts
    assert found[0].content == told[-1][0]
    assert not {told[1][0], told[2][0]} & {f.content for f in found}
    history = (await facts.ok("history", fact_id=ids[-1])).facts
    assert [f.content for f in history] == [told[1][0], told[2][0], told[4][0]]
    assert (await facts.one(ids[3])).superseded_by is None  # Sam's news is his
