"""The inspector's listings over the real broker and services: the facts' sort spans all of
the user's facts (not the page shown), paged; a bad sort is refused clearly; the playbook
view lists the grants in force (to its owner) and revokes one."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.clients.playbook import PlaybookRef
from react_mem.inspector.backend import Memory, Where
from react_mem.schema.facts import FactInput, FactResponse
from react_mem.schema.playbook import PlaybookResponse
from react_mem.schema.scope import Scope
from tests.support.embedder import HashingEmbedder
from tests.support.inspector import inspector_client, log_in, memory_over
from tests.support.memory_services import MovableClock, serving, topics

pytestmark = pytest.mark.broker

HTML = {"accept": "text/html"}


@contextlib.asynccontextmanager
async def services(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> AsyncIterator[Memory]:
    queues = {
        "fact-memory": topics("fact-memory", unique, "default"),
        "playbook-memory": topics("playbook-memory", unique, "default"),
    }
    async with (
        serving(
            FactMemoryProcessor, FactResponse, transport, pid=f"fact-memory-{unique}",
            queues={"default": queues["fact-memory"]}, data_dir=tmp_path / "facts",
            registry=registry, clock=MovableClock(), embedder=HashingEmbedder(),
        ),
        serving(
            PlaybookMemoryProcessor, PlaybookResponse, transport,
            pid=f"playbook-memory-{unique}", queues={"default": queues["playbook-memory"]},
            data_dir=tmp_path / "playbook", registry=registry, clock=MovableClock(),
            embedder=HashingEmbedder(),
        ),
    ):  # fmt: skip
        memory = memory_over(transport, queues, unique)
        try:
            yield memory
        finally:
            await memory.close()


def _shown(html: str) -> list[str]:
    """The facts' contents in the order the page shows them."""
    return re.findall(r'<a href="/fact\?[^"]*">([^<]+)</a>', html)


async def test_the_facts_sort_spans_every_page_and_a_bad_sort_is_refused(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with services(transport, tmp_path, unique, registry) as memory:
        facts = await memory.facts(Where())
        alice = Scope("default", "default", "alice")
        contents = [f"note number {n:02d} of alice" for n in range(45)]
        # importances scattered over the store's id order: a page-local sort would show
        # the first page's best, not the best of all
        importance = {c: ((n * 17) % 45) / 45 for n, c in enumerate(contents)}
        await facts.store(alice, [FactInput(content=c, importance=importance[c]) for c in contents])
        await facts.store(Scope("default", "default", "bob"), [FactInput(content="bob's top")])
        best = sorted(contents, key=lambda c: -importance[c])
        async with inspector_client(memory) as (client, _):
            await log_in(client)
            first = await client.get("/facts?user=alice&sort=importance&limit=20", headers=HTML)
            assert _shown(first.text) == best[:20]
            assert "of 45" in first.text and "bob" not in first.text
            following = re.search(r'offset=(\d+)" rel="next"', first.text)
            assert following and following.group(1) == "20"
            second = await client.get(
                "/facts?user=alice&sort=importance&limit=20&offset=20", headers=HTML
            )
            assert _shown(second.text) == best[20:40]
            third = await client.get(
                "/facts?user=alice&sort=importance&limit=20&offset=40", headers=HTML
            )
            assert _shown(third.text) == best[40:] and 'rel="next"' not in third.text
            bad = await client.get("/facts?user=alice&sort=size", headers=HTML)
            assert bad.status_code == 400 and "sort must be one of" in bad.text
            worse = await client.get("/facts?user=alice&sort=time&offset=-5", headers=HTML)
            assert worse.status_code == 400 and "offset" in worse.text


async def test_the_playbook_view_lists_the_grants_in_force_and_revokes_one(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with services(transport, tmp_path, unique, registry) as memory:
        book = await memory.playbook(Where())
        await book.grant(PlaybookRef(user="alice"), "viewer", ["bob"])
        await book.grant(PlaybookRef(user="alice"), "editor", ["carol"])
        await book.grant(PlaybookRef(user="dave"), "viewer", ["zoltan9"])  # another owner's
        async with inspector_client(memory) as (client, _):
            csrf = await log_in(client)
            page = (await client.get("/playbook?user=alice", headers=HTML)).text
            table = page[page.index('id="grants-in-force"') :]
            assert re.search(r"<td>bob</td>\s*<td>viewer</td>", table)
            assert re.search(r"<td>carol</td>\s*<td>editor</td>", table)
            assert "zoltan9" not in page  # dave's grants never on alice's page
            form = {"csrf": csrf, "user": "alice", "grantees": "bob", "relation": "revoke"}
            form |= {"workspace": "default", "flow": "default", "collection": "default"}
            done = await client.post("/playbook/grants", data=form)
            assert done.status_code == 303
            after = (await client.get("/playbook?user=alice", headers=HTML)).text
            assert "<td>bob</td>" not in after and "<td>carol</td>" in after
            assert [(g.user, g.relation) for g in await book.grants(PlaybookRef(user="alice"))] == [
                ("carol", "editor")
            ]
