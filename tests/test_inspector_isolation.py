"""Isolation in the inspector (issue 27): for generated users and contents, one user's pages
(facts listed, searched, one fact's page) never show another user's memory. Over the real broker
and fact-memory."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.inspector.backend import Where
from react_mem.schema.facts import FactInput, FactResponse
from react_mem.schema.scope import Scope, owner_id
from tests.support.embedder import HashingEmbedder
from tests.support.inspector import TOKEN, inspector_client, memory_over
from tests.support.memory_services import MovableClock, serving, topics
from tests.test_fuzz_queues import drawn_from

pytestmark = pytest.mark.broker

_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
#: Users that look alike or like patterns, and drawn ones.
users = st.one_of(st.sampled_from(("alice", "Alice", "alice ", " ", "*", "%", "ålice")), _text)
#: Distinct owners: look-alike ids ("a" and "a\u200b") are one owner, see ``owner_id``.
owners = st.lists(
    st.tuples(users, _text), min_size=3, max_size=6, unique_by=lambda o: owner_id(o[0])
)


def _shown(html: str) -> str:
    """A page less the search box, which repeats the query (another user's token, asked)."""
    return re.sub(r'<form[^>]*role="search".*?</form>', "", html, flags=re.S)


async def test_no_users_memory_shows_on_another_users_pages(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    registry: CollectorRegistry,
    request: pytest.FixtureRequest,
) -> None:
    rounds = drawn_from(owners, max(1, request.config.getoption("--fuzz-examples") // 5))
    queues = topics("fact-memory", unique, "default")
    async with serving(
        FactMemoryProcessor,
        FactResponse,
        transport,
        pid=f"fact-memory-{unique}",
        queues={"default": queues},
        data_dir=tmp_path / "facts",
        registry=registry,
        clock=MovableClock(),
        embedder=HashingEmbedder(),
    ):
        memory = memory_over(transport, {"fact-memory": queues}, unique)
        async with inspector_client(memory) as (client, _):
            client.headers["authorization"] = f"Bearer {TOKEN}"
            facts = await memory.facts(Where())
            for n, drawn in enumerate(rounds):
                collection = f"c{n}"
                # A token per user, unique to the round: what must never cross.
                tokens = {u: f"kw{uuid.uuid4().hex[:10]}" for u, _ in drawn}
                for user, words in drawn:
                    content = f"{words} remembers {tokens[user]}"
                    await facts.store(
                        Scope("default", collection, user), [FactInput(content=content)]
                    )
                for user, words in drawn:
                    others = [t for u, t in tokens.items() if u != user]
                    base = {"user": user, "collection": collection}
                    pages = [
                        await client.get("/facts", params=base),
                        await client.get("/facts", params=base | {"q": f"{words} remembers"}),
                        *[await client.get("/facts", params=base | {"q": t}) for t in others[:2]],
                    ]
                    assert all(p.status_code == 200 for p in pages)
                    assert tokens[user] in pages[0].text
                    (own,) = re.findall(r'name="id" value="([^"]+)"', pages[0].text)
                    pages.append(await client.get("/fact", params=base | {"id": own}))
                    assert tokens[user] in pages[-1].text
                    for page in pages:
                        shown = _shown(page.text)
                        assert not any(t in shown for t in others), (user, page.url)
