"""The inspector in a real browser (issue 27): Debian's chromium driven by Playwright. Log
in, find alice's fact and the turn it came from, open the context of an answer, correct the
fact, delete it, forget alice and see her gone; bob's memory never on alice's pages. Sort
alice's facts over every page and revoke a grant listed on her playbook."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.clients.playbook import PlaybookRef
from react_mem.inspector.backend import Where
from react_mem.schema.facts import FactInput
from react_mem.schema.scope import Scope
from tests.support.agent_stack import agent_stack
from tests.support.inspector import TOKEN, served, stack_memory
from tests.test_inspector import ALICE_SAYS, FACT_A, FACT_A2, FACT_B, _learned, llm
from tests.test_inspector_lists import services

#: One run: the browser is the subject here, not the broker.
pytestmark = [pytest.mark.broker, pytest.mark.pulsar_only("the browser is the subject")]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _browser() -> str:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    return CHROMIUM


async def test_an_operator_finds_corrects_and_forgets_alice_in_a_browser(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    from playwright.async_api import async_playwright, expect

    executable = _browser()
    async with (
        agent_stack(
            transport, tmp_path, unique, script=llm, learner=True, playbook=PlaybookMemoryProcessor
        ) as stack,
    ):
        await _learned(stack)
        await stack.ask("Where do I live?", conversation_id="ca", user="alice", session_id="sa2")
        async with served(stack_memory(stack)) as base, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=executable, headless=True)
            page = await browser.new_page()
            shown: list[str] = []

            async def visit() -> None:
                shown.append(await page.content())

            # Nothing without the token: the login form.
            await page.goto(f"{base}/facts?user=alice")
            await expect(page.get_by_role("heading", name="Log in")).to_be_visible()
            await page.get_by_label("Token").fill(TOKEN)
            await page.get_by_role("button", name="Log in").click()

            # alice's facts; then the fact, where it came from.
            await expect(page.get_by_role("link", name=FACT_A)).to_be_visible()
            await visit()
            await page.get_by_role("link", name=FACT_A).click()
            await expect(page.locator(".turn-query")).to_have_text(ALICE_SAYS)
            await visit()

            # The context of the answer to her next question: the fact was in the prompt.
            await page.get_by_role("link", name="turn 1").click()
            await expect(page.get_by_role("heading", name="Conversation ca")).to_be_visible()
            await visit()
            await page.get_by_role("link", name="context of this answer").last.click()
            row = page.locator("tr.used-fact", has_text=FACT_A)
            await expect(row).to_be_visible()
            await expect(row.locator("td").nth(2)).to_have_text(re.compile(r"^0\.\d{3}$"))
            await expect(row.locator("td").nth(3)).to_have_text(re.compile(r"^[1-9]\d*$"))
            await visit()

            # Correct it, keyboard only, then delete it.
            await page.goto(f"{base}/facts?user=alice")
            await page.get_by_role("link", name=FACT_A).click()
            await page.get_by_label("Content").fill(FACT_A2)
            await page.get_by_label("Content").press("Tab")  # the importance field
            await page.keyboard.type("0.9")
            await page.get_by_role("button", name="Save the correction").press("Enter")
            await expect(page.locator("blockquote.fact")).to_have_text(FACT_A2)
            await visit()
            await page.get_by_role("button", name="Delete this fact").click()
            await expect(page.get_by_role("status")).to_contain_text("Deleted 1 fact")
            await expect(page.get_by_text(FACT_A2)).to_have_count(0)
            await visit()

            # Forget alice: typed confirmation, the per-service report, and she is gone.
            await page.goto(f"{base}/forget?user=alice")
            await page.get_by_label("Type the user's id again to confirm").fill("alice")
            await page.get_by_role("button", name="Forget this user").click()
            await expect(page.locator(".report")).to_contain_text("fact-memory: forgotten")
            await page.goto(f"{base}/facts?user=alice")
            await expect(page.get_by_text("No facts")).to_be_visible()
            await visit()
            await page.goto(f"{base}/conversations?user=alice")
            await expect(page.get_by_text("No conversations")).to_be_visible()

            # bob is still there, on his own page, and was never on alice's.
            await page.goto(f"{base}/facts?user=bob")
            await expect(page.get_by_role("link", name=FACT_B)).to_be_visible()
            await browser.close()
    assert len(shown) == 7
    for html in shown:
        assert FACT_B not in html and "bees" not in html


async def test_the_sort_spans_every_page_and_grants_are_listed_and_revoked_in_a_browser(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    from playwright.async_api import async_playwright, expect

    executable = _browser()
    async with services(transport, tmp_path, unique, registry) as memory:
        alice = Scope("default", "default", "alice")
        contents = [f"note number {n:02d} of alice" for n in range(30)]
        importance = {c: ((n * 7) % 30) / 30 for n, c in enumerate(contents)}
        facts = await memory.facts(Where())
        await facts.store(alice, [FactInput(content=c, importance=importance[c]) for c in contents])
        best = sorted(contents, key=lambda c: -importance[c])
        book = await memory.playbook(Where())
        await book.grant(PlaybookRef(user="alice"), "viewer", ["bob"])
        await book.grant(PlaybookRef(user="alice"), "editor", ["carol"])
        async with served(memory) as base, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=executable, headless=True)
            page = await browser.new_page()
            await page.goto(f"{base}/login")
            await page.get_by_label("Token").fill(TOKEN)
            await page.get_by_role("button", name="Log in").click()

            # By importance, 20 a page: the first page holds the 20 best of all 30.
            await page.goto(f"{base}/facts?user=alice")
            await page.get_by_label("Sort by").select_option("importance")
            await page.get_by_label("Per page").select_option("20")
            form = page.get_by_role("search", name="Search facts")
            await form.get_by_role("button", name="Show").click()
            rows = page.locator("#results tbody tr td:nth-child(2) a")
            await expect(rows).to_have_text(best[:20])
            await page.get_by_role("link", name="Next page").click()
            await expect(rows).to_have_text(best[20:])

            # The playbook's grants in force; revoke bob's.
            await page.goto(f"{base}/playbook?user=alice")
            grants = page.get_by_role("table", name="Grants in force")
            await expect(grants.locator("tbody tr")).to_have_count(2)
            await grants.get_by_role("button", name="Revoke viewer from bob").click()
            await expect(grants.locator("tbody tr")).to_have_count(1)
            await expect(grants).to_contain_text("carol")
            await expect(grants).not_to_contain_text("bob")
            await browser.close()
