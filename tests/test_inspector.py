"""The web memory inspector (issue 27) over the real broker and services: what the agent
knows about alice, where it learned it, what an answer's prompt held; corrections, deletes,
export, forgetting; and nobody without the token sees any of it."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import httpx
import pytest

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.inspector.auth import COOKIE
from react_mem.inspector.backend import Where
from react_mem.schema import TextCompletionRequest
from react_mem.schema.facts import FactInput
from react_mem.schema.scope import Scope
from tests.support.agent_stack import Stack, agent_stack, facts_of
from tests.support.inspector import TOKEN, csrf_of, inspector_client, log_in, stack_memory
from tests.support.memory_services import until

pytestmark = pytest.mark.broker

ALICE_SAYS = "Hi, I am Alice and I live in Lisbon."
FACT_A = "Alice lives in Lisbon."
FACT_A2 = "Alice lives in Porto since May."
BOB_SAYS = "Hello, I am Bob and I keep bees."
FACT_B = "Bob keeps bees."
HTML = {"accept": "text/html"}


def llm(request: TextCompletionRequest) -> str:
    if request.system.startswith("You are a helpful agent"):
        if FACT_A in request.prompt:
            return "Thought: memory says Lisbon\nFinal Answer: You live in Lisbon."
        return "Thought: nothing known\nFinal Answer: Noted."
    if "curate the long-term memory" in request.system:
        if "Alice" in request.prompt and "Where do I live" not in request.prompt:
            return json.dumps({"facts": [{"content": FACT_A, "importance": 0.6}]})
        if "Bob" in request.prompt:
            return json.dumps({"facts": [{"content": FACT_B, "importance": 0.6}]})
        return json.dumps({"facts": []})
    if "running summary" in request.system:
        return json.dumps({"summary": "The user introduced themselves."})
    return json.dumps({"lessons": []})


async def _learned(stack: Stack) -> None:
    """alice's and bob's first turns, and the facts the learner took from them."""
    await stack.ask(ALICE_SAYS, conversation_id="ca", user="alice", session_id="sa1")
    await stack.ask(BOB_SAYS, conversation_id="cb", user="bob", session_id="sb1")

    async def both() -> bool:
        return FACT_A in await facts_of(stack, "alice") and FACT_B in await facts_of(stack, "bob")

    await until(both, timeout=90)


async def test_no_token_no_page_and_a_forged_form_is_refused(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with (
        agent_stack(transport, tmp_path, unique, script=llm, services=("fact-memory",)) as stack,
        inspector_client(stack_memory(stack)) as (client, _),
    ):
        memory = stack_memory(stack)
        facts = await memory.facts(Where())
        await facts.store(Scope("default", "default", "alice"), [FactInput(content=FACT_A)])
        await memory.close()
        for path in ("/", "/facts?user=alice", "/export?user=alice", "/audit", "/context"):
            refused = await client.get(path)
            assert refused.status_code == 401 and "alice" not in refused.text.lower()
            page = await client.get(path, headers=HTML)  # a browser gets the login form
            assert page.status_code == 401 and 'name="token"' in page.text
        wrong = await client.get("/facts?user=alice", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        bad_login = await client.post("/login", data={"token": "not-the-token-at-all"})
        assert bad_login.status_code == 401 and COOKIE not in bad_login.headers.get(
            "set-cookie", ""
        )

        login = await client.post("/login", data={"token": TOKEN})
        cookie = login.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert login.status_code == 303
        csrf = csrf_of((await client.get("/facts?user=alice", headers=HTML)).text)
        fact_ids = await _listed(client)
        assert len(fact_ids) == 1

        # A form posted from another site carries the cookie but not the session's token.
        for forged in ({}, {"csrf": "guessed"}, {"csrf": csrf[:-1]}):
            reply = await client.post(
                "/facts/delete", data={"user": "alice", "id": fact_ids, **forged}
            )
            assert reply.status_code == 403
        assert await _listed(client) == fact_ids  # nothing was deleted

        # A script with the bearer token needs no session (and so no CSRF token).
        client.cookies.clear()
        bearer = {"authorization": f"Bearer {TOKEN}"}
        listed = await client.get("/facts?user=alice", headers=bearer)
        assert listed.status_code == 200


async def _listed(client: httpx.AsyncClient) -> list[str]:
    page = await client.get("/facts?user=alice", headers=HTML)
    assert page.status_code == 200
    return re.findall(r'name="id" value="([^"]+)"', page.text)


async def _ids(client: httpx.AsyncClient, user: str = "alice") -> list[str]:
    exported = await client.get(f"/export?user={user}")
    assert exported.status_code == 200
    return [f["id"] for f in exported.json()["facts"]]


async def _id_of(client: httpx.AsyncClient, content: str) -> str:
    exported = await client.get("/export?user=alice")
    (found,) = [f["id"] for f in exported.json()["facts"] if f["content"] == content]
    return str(found)


async def test_what_the_agent_knows_about_alice_where_from_and_in_which_prompt(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="react_mem.inspector")
    async with (
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=llm,
            learner=True,
            playbook=PlaybookMemoryProcessor,
        ) as stack,
        inspector_client(stack_memory(stack)) as (client, _),
    ):
        await _learned(stack)
        answer = await stack.ask(
            "Where do I live?", conversation_id="ca", user="alice", session_id="sa2"
        )
        assert answer[-1].content == "You live in Lisbon."
        csrf = await log_in(client)

        # What does the agent know about alice? Only alice's facts, never bob's.
        page = (await client.get("/facts?user=alice&sort=importance", headers=HTML)).text
        assert FACT_A in page and FACT_B not in page and "bees" not in page
        found = (await client.get("/facts?user=alice&q=Lisbon", headers=HTML)).text
        assert FACT_A in found and FACT_B not in found
        fact_id = await _id_of(client, FACT_A)

        # Where did it learn it? The conversation, the turn, the learner run.
        detail = (await client.get(f"/fact?user=alice&id={fact_id}", headers=HTML)).text
        assert "ca" in detail and ALICE_SAYS.replace("'", "&#39;") in detail
        assert "trajectory:" in detail  # the learner run's record key

        # What did the answer's prompt hold? The fact, with its score and tokens.
        context = (await client.get("/context?user=alice&session=sa2", headers=HTML)).text
        assert FACT_A in context and "used-fact" in context
        assert "bees" not in context
        as_bob = await client.get("/context?user=bob&session=sa2", headers=HTML)
        assert as_bob.status_code == 404  # bob cannot reach alice's answer by its id

        # Correct it: a new version; the old one is its earlier value.
        edited = await client.post(
            "/fact/edit",
            data={"csrf": csrf, "user": "alice", "id": fact_id, "content": FACT_A2,
                  "importance": "0.9", "expires_in_days": "30"},
        )  # fmt: skip
        assert edited.status_code == 303
        new_page = await client.get(edited.headers["location"], headers=HTML)
        assert FACT_A2 in new_page.text and FACT_A in new_page.text  # the supersede chain
        assert "never" not in new_page.text.split("Expires")[1][:80]
        (exported,) = [f for f in (await client.get("/export?user=alice")).json()["facts"]
                       if f["content"] == FACT_A2]  # fmt: skip
        assert [f["content"] for f in exported["history"]] == [FACT_A]

        # bob's memory through the same pages, and never alice's there.
        bob_page = (await client.get("/facts?user=bob", headers=HTML)).text
        assert FACT_B in bob_page and "Alice" not in bob_page
        conversations = (await client.get("/conversation?user=alice&id=ca", headers=HTML)).text
        assert ALICE_SAYS.replace("'", "&#39;") in conversations and BOB_SAYS not in conversations
        assert (await client.get("/playbook?user=alice", headers=HTML)).status_code == 200
        assert (await client.get("/episodes?user=alice", headers=HTML)).status_code == 200

        # Delete it; end the conversation; both audited with the export.
        current = await _id_of(client, FACT_A2)
        gone = await client.post("/facts/delete", data={"csrf": csrf, "user": "alice",
                                                        "id": current})  # fmt: skip
        assert gone.status_code == 303 and current not in await _ids(client)
        ended = await client.post("/conversation/end", data={"csrf": csrf, "user": "alice",
                                                             "id": "ca"})  # fmt: skip
        assert ended.status_code == 303

        async def audited() -> bool:
            text = (await client.get("/audit", headers=HTML)).text
            return all(op in text for op in ("update-fact", "delete-facts", "end-conversation"))

        await until(audited, timeout=20)

        # Forget alice: a typed confirmation first, then each service's report.
        unconfirmed = await client.post(
            "/forget", data={"csrf": csrf, "user": "alice", "confirm": "alic", "scope": "all"}
        )
        assert unconfirmed.status_code == 400
        assert "Lisbon" in (await client.get("/conversation?user=alice&id=ca")).text
        report = await client.post(
            "/forget", data={"csrf": csrf, "user": "alice", "confirm": "alice", "scope": "all"}
        )
        assert report.status_code == 200 and "fact-memory: forgotten" in report.text
        assert "memory-learner: forgotten" in report.text
        export = (await client.get("/export?user=alice")).json()
        assert export["facts"] == [] and export["conversations"] == []
        assert FACT_B in (await client.get("/facts?user=bob", headers=HTML)).text

    # The server's log holds routes and statuses, never what users said or searched.
    logged = caplog.text
    assert "/facts" in logged
    for words in ("Lisbon", "alice", "bees", "Porto"):
        assert words not in logged
