"""fact-memory's ``sorted``: one owner's facts ordered by time, importance or access over all
of them (not a page at a time), paged; never another owner's; bad input refused. Over the
real broker and edge store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.errors import BadRequest
from react_mem.schema.facts import FactInput, FactRequest
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService, fact_service
from tests.support.memory_services import Raw
from tests.test_fuzz_queues import drawn_from

pytestmark = pytest.mark.broker

_word = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=3, max_size=8)
_user = st.one_of(st.sampled_from(("alice", "Alice", "alice ", "*", "%", "")), _word)
#: Owners (a user, or "" for the collection's shared facts), each with importances.
owners = st.lists(
    st.tuples(_user, st.lists(st.integers(0, 10), min_size=1, max_size=6)),
    min_size=2,
    max_size=4,
    unique_by=lambda o: o[0].strip().lower() or "-",
)


async def _all(facts: FactService, sort_by: str, limit: int, **scope: object) -> list[str]:
    """Every page of a sorted listing, in order (contents)."""
    seen, offset = [], None
    while True:
        reply = await facts.ok("sorted", sort_by=sort_by, limit=limit, offset=offset, **scope)
        seen += [f.content for f in reply.facts]
        offset = reply.next_offset
        if offset is None:
            return seen


async def test_the_order_spans_every_page_not_the_one_shown(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport, registry, tmp_path, unique, client=FactService, embedder=HashingEmbedder()
    ) as facts:
        contents = [f"item {n:02d} is stored here" for n in range(12)]
        for n, content in enumerate(contents):  # importances scattered over the id order
            fact = FactInput(content=content, importance=((n * 7) % 12) / 12)
            await facts.ok("store", user="u", facts=[fact])
            facts.clock.advance(10)
        await facts.store("bob holds the top importance", user="bob")
        by_importance = sorted(contents, key=lambda c: -((int(c[5:7]) * 7) % 12))
        assert await _all(facts, "importance", 5, user="u") == by_importance
        assert await _all(facts, "time", 5, user="u") == contents[::-1]
        first = await facts.ok("sorted", sort_by="time", user="u", limit=5)
        assert (first.total, first.next_offset, len(first.facts)) == (12, "5", 5)
        up = await facts.ok("sorted", sort_by="time", ascending=True, user="u", limit=3)
        assert [f.content for f in up.facts] == contents[:3]
        # access: retrievals (in the side table, not yet in the records) count
        for _ in range(3):
            await facts.ok("retrieve", user="u", query=contents[4], top_k=1)
        await facts.ok("retrieve", user="u", query=contents[9], top_k=1)
        top = await facts.ok("sorted", sort_by="access", user="u", limit=2)
        assert [(f.content, f.access_count) for f in top.facts] == [
            (contents[4], 3),
            (contents[9], 1),
        ]


async def test_bad_sort_keys_and_offsets_are_refused_clearly(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    with pytest.raises(BadRequest, match="sort_by") as caught:
        FactRequest.decode(json.dumps({"operation": "sorted", "sort_by": "size"}).encode())
    assert caught.value.type == "invalid"
    async with fact_service(
        transport, registry, tmp_path, unique, client=FactService, embedder=HashingEmbedder()
    ) as facts:
        await facts.store("one fact to list", user="u")
        raw = Raw(body={"operation": "sorted", "sort_by": "bogus", "user": "u"})
        refused = await facts.running.ask(raw, "ws-a")  # over the wire, as JSON
        assert refused.error is not None and refused.error.type == "invalid"
        assert "sort_by" in refused.error.message and "'importance'" in refused.error.message
        assert await facts.error("sorted", user="u") == "invalid"  # sort_by required
        assert await facts.error("sorted", sort_by="time", user="u", offset="-1") == "invalid"
        assert await facts.error("sorted", sort_by="time", user="u", offset="x") == "invalid"
        assert await facts.error("sorted", sort_by="time", user="u", limit=5000) == "bad-request"
        assert len((await facts.ok("sorted", sort_by="time", user="u")).facts) == 1


async def test_a_sorted_listing_never_holds_another_owners_facts(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    request: pytest.FixtureRequest,
) -> None:
    rounds = drawn_from(owners, max(1, request.config.getoption("--fuzz-examples") // 5))
    async with fact_service(
        transport, registry, tmp_path, unique, client=FactService, embedder=HashingEmbedder()
    ) as facts:
        for n, drawn in enumerate(rounds):
            collection = f"c{n}"
            mine: dict[str, set[str]] = {}
            for user, importances in drawn:
                inputs = [
                    FactInput(content=f"owner {n} {user!r} fact {k}", importance=i / 10)
                    for k, i in enumerate(importances)
                ]
                reply = await facts.ok("store", user=user, collection=collection, facts=inputs)
                mine[user] = {s.id for s in reply.stored}
            for user in mine:
                for sort_by in ("time", "importance", "access"):
                    listed, offset = [], None
                    while True:
                        reply = await facts.ok(
                            "sorted", sort_by=sort_by, user=user, collection=collection,
                            limit=2, offset=offset,
                        )  # fmt: skip
                        listed += reply.facts
                        offset = reply.next_offset
                        if offset is None:
                            break
                    # every one of the owner's facts once, and nothing else
                    assert sorted(f.id for f in listed) == sorted(mine[user]), (user, sort_by)


async def test_the_order_follows_every_change_between_pages(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """The service keeps each owner's sort keys between requests: a store, an update, a
    delete or an expiry must still show at once."""
    async with fact_service(
        transport, registry, tmp_path, unique, client=FactService, embedder=HashingEmbedder()
    ) as facts:

        async def top(n: int = 3, **more: object) -> list[str]:
            reply = await facts.ok("sorted", sort_by="importance", user="u", limit=n, **more)
            return [f.content for f in reply.facts]

        inputs = [FactInput(content=f"plain fact {k} here", importance=k / 10) for k in range(5)]
        ids = [s.id for s in (await facts.ok("store", user="u", facts=inputs)).stored]
        assert await top() == ["plain fact 4 here", "plain fact 3 here", "plain fact 2 here"]
        await facts.ok("store", user="u", facts=[FactInput(content="now top", importance=0.95)])
        assert (await top())[0] == "now top"
        changed = FactInput(content="plain fact 0 raised", importance=1.0)
        await facts.ok("update", user="u", fact_id=ids[0], fact=changed)
        assert (await top())[0] == "plain fact 0 raised"
        await facts.ok("delete", user="u", ids=[ids[4]])
        assert "plain fact 4 here" not in await top(10)
        await facts.ok("store", user="v", facts=[FactInput(content="v's", importance=1.0)])
        assert "v's" not in await top(10)  # another owner's write: still not theirs
        short = FactInput(content="short lived", importance=0.99, ttl_seconds=60)
        await facts.ok("store", user="u", facts=[short])
        assert "short lived" in await top()
        facts.clock.advance(120)  # expired: gone from the listing, unswept or not
        listed = await facts.ok("sorted", sort_by="importance", user="u", limit=50)
        assert "short lived" not in [f.content for f in listed.facts] and listed.total == 5
