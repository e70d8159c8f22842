"""Randomized isolation: no owner reads or changes another owner's memory.

Owners (workspace, collection, user) and their conversation ids are drawn with hypothesis up
front (users include None, "", whitespace, case variants, "*", "%" and unicode; conversation
ids collide on purpose), one canary of each memory kind is written per owner over the real
broker, and then every operation of every memory service is run from every owner against
every other owner's ids, conversation ids and words. No reply may carry another owner's
canary or record id, another owner's record must look exactly like one that does not exist,
and every other owner's memory must read back unchanged after each owner's turn. A quota notice
left on each owner's conversation is given once, to that owner only.
"""

from __future__ import annotations

import ast
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.schema import AgentStep, TextCompletionRequest, WireModel
from react_mem.schema.conversations import (
    ConversationRequest,
    ConversationResponse,
    QuotaNotice,
)
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.playbook import (
    Delta,
    DeltaOperation,
    PlaybookRequest,
    PlaybookResponse,
)
from react_mem.schema.retrieval import RetrievalOptions
from react_mem.schema.scope import Scope
from tests.support.agent_stack import Stack, agent_stack
from tests.support.memory_services import MovableClock, serving, topics
from tests.test_fuzz_queues import drawn_from

WORKSPACES = ("ws-a", "ws-b")
#: Users that look alike, match everything in some query language, or are no user at all.
ODD_USERS = (
    None,
    "",
    " ",
    "alice",
    "Alice",
    "alice ",
    "*",
    "%",
    "_",
    ".*",
    "ålice",
    "\u0430lice",
)  # the last: a Cyrillic a
_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
users = st.one_of(st.sampled_from(ODD_USERS), _text)
collections = st.one_of(st.sampled_from(("default", "Default", "*", "%")), _text)
#: Few conversation ids, so owners share them: an id is never a credential.
conversations = st.one_of(st.sampled_from(("trip", "Trip", "c-1")), _text)


@dataclass(frozen=True)
class Owner:
    workspace: str
    collection: str
    user: str | None
    conversation: str
    token: str

    @property
    def key(self) -> Scope:
        return Scope(self.workspace, self.collection, self.user)

    def fields(self, variant: int = 0, **more: Any) -> dict[str, Any]:
        """The owner's request fields; with no user, ``variant`` picks None or ""."""
        user = ("", None)[variant % 2] if self.user in (None, "") else self.user
        return {"collection": self.collection, "user": user, **more}

    @property
    def fact(self) -> str:
        """Two sentences: the fact is stored with a vector per sentence too, which the
        retrievals rank by (``sentences``)."""
        return f"The secret code word of the vault is {self.token}. Nobody else may use it."

    @property
    def goal(self) -> str:
        return f"open the vault with code word {self.token}"


owners_drawn = st.lists(
    st.builds(
        Owner,
        workspace=st.sampled_from(WORKSPACES),
        collection=collections,
        user=users,
        conversation=conversations,
        token=st.just(""),
    ),
    min_size=4,
    max_size=6,
)


def owner_set(count: int) -> list[Owner]:
    """The odd users of one collection, then drawn owners; one per owner key."""
    fixed = [Owner("ws-a", "default", u, "trip", "") for u in ODD_USERS]
    fixed.append(Owner("ws-b", "default", "alice", "trip", ""))
    found: dict[Scope, Owner] = {}
    for owner in [*fixed, *(o for drawn in drawn_from(owners_drawn, count) for o in drawn)]:
        found.setdefault(owner.key, owner)
    return [
        Owner(o.workspace, o.collection, o.user, o.conversation, f"kw{i:03d}{uuid.uuid4().hex[:6]}")
        for i, o in enumerate(found.values())
    ]


class Services:
    """Clients of fact, episode and conversation memory, by service and workspace."""

    def __init__(self, clients: dict[str, dict[str, RequestResponseClient[Any, Any]]]) -> None:
        self.clients = clients

    async def ask(self, service: str, workspace: str, request: WireModel) -> Any:
        return await self.clients[service][workspace].request(request, timeout=30)

    async def ok(self, service: str, workspace: str, request: WireModel) -> Any:
        reply = await self.ask(service, workspace, request)
        assert reply.error is None, (service, request, reply.error)
        return reply


@contextlib.asynccontextmanager
async def services(
    transport: PulsarTransport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> AsyncIterator[Services]:
    clock = MovableClock()
    kinds = (
        ("fact-memory", FactMemoryProcessor, FactResponse, ()),
        ("episode-memory", EpisodeMemoryProcessor, EpisodeResponse, ()),
        ("conversation-memory", ConversationMemoryProcessor, ConversationResponse, ("ended",)),
        ("playbook-memory", PlaybookMemoryProcessor, PlaybookResponse, ()),
    )
    async with contextlib.AsyncExitStack() as stack:
        running = {}
        for name, cls, response, extra in kinds:
            queues = {ws: topics(name, unique, ws, extra) for ws in WORKSPACES}
            running[name] = await stack.enter_async_context(
                serving(
                    cls,
                    response,
                    transport,
                    pid=f"{name}-{unique}",
                    queues=queues,
                    data_dir=tmp_path / name,
                    registry=registry,
                    clock=clock,
                )
            )
        yield Services({name: r.clients for name, r in running.items()})


@dataclass
class Canaries:
    fact: str
    episode: str


async def write_canaries(svc: Services, owner: Owner) -> Canaries:
    ws, scope = owner.workspace, owner.fields(conversation_id=owner.conversation)
    stored = await svc.ok(
        "fact-memory",
        ws,
        FactRequest(operation="store", facts=[FactInput(content=owner.fact)], **scope),
    )
    episode = await svc.ok(
        "episode-memory",
        ws,
        EpisodeRequest(
            operation="store",
            goal=owner.goal,
            steps=[AgentStep(thought=f"use {owner.token}", action="open", observation="open")],
            outcome="success",
            score=0.2,
            lessons=[f"the code word is {owner.token}"],
            **scope,
        ),
    )
    await svc.ok(
        "conversation-memory",
        ws,
        ConversationRequest(
            operation="append",
            turn_id="t0",
            query=f"What is the code word? It is {owner.token}",
            answer=f"Noted: {owner.token}",
            summary=f"about {owner.token}",
            **scope,
        ),
    )
    notice = QuotaNotice(notice_id=notice_id(owner), kind="fact", action="evicted", count=1)
    await svc.ok(
        "conversation-memory", ws, ConversationRequest(operation="notice", notice=notice, **scope)
    )
    return Canaries(stored.stored[0].id, episode.id)


def notice_id(owner: Owner) -> str:
    """The quota notice left on the owner's conversation (it names the owner's token)."""
    return f"nt-{owner.token}"


async def snapshot(svc: Services, owner: Owner, mine: Canaries) -> str:
    """Everything the owner holds, as its own requests read it (reads that change nothing)."""
    ws = owner.workspace
    facts = await svc.ok(
        "fact-memory", ws, FactRequest(operation="get", ids=[mine.fact], **owner.fields())
    )
    episodes = await svc.ok(
        "episode-memory", ws, EpisodeRequest(operation="get", ids=[mine.episode], **owner.fields())
    )
    talk = await svc.ok(
        "conversation-memory",
        ws,
        ConversationRequest(operation="get", conversation_id=owner.conversation, **owner.fields()),
    )
    assert [f.content for f in facts.facts] == [owner.fact]
    assert [e.goal for e in episodes.episodes] == [owner.goal]
    assert talk.conversation is not None and owner.token in talk.conversation.turns[0].query
    return "\n".join(r.encode().decode() for r in (facts, episodes, talk))


FACT_QUERY = "What is the secret code word of the vault?"
BY_SENTENCES = RetrievalOptions(mode="hybrid", sentences=True)
EPISODE_GOAL = "open the vault with a code word"


def owner_ops(fields: dict[str, Any]) -> list[tuple[str, WireModel]]:
    """Reads and writes aimed at everything the attacker's scope might reach: every
    canary has the same wording, so these queries would find any owner's."""
    pass_id = f"iso-{uuid.uuid4().hex[:8]}"
    merge = {"similarity_threshold": 0.05, "importance_threshold": 1.0}
    return [
        ("fact-memory", FactRequest(operation="retrieve", query=FACT_QUERY, top_k=20, **fields)),
        ("fact-memory", FactRequest(operation="list", limit=1000, **fields)),
        (
            "fact-memory",
            FactRequest(
                operation="retrieve", query=FACT_QUERY, top_k=20, retrieval=BY_SENTENCES, **fields
            ),
        ),
        (
            "fact-memory",
            FactRequest(operation="consolidate", consolidation_id=pass_id, **merge, **fields),
        ),
        ("fact-memory", FactRequest(operation="unconsolidate", consolidation_id=pass_id, **fields)),
        (
            "episode-memory",
            EpisodeRequest(operation="retrieve", goal=EPISODE_GOAL, top_k=20, **fields),
        ),
        ("episode-memory", EpisodeRequest(operation="list", limit=200, **fields)),
        (
            "episode-memory",
            EpisodeRequest(operation="consolidate", consolidation_id=pass_id, **merge, **fields),
        ),
        (
            "episode-memory",
            EpisodeRequest(operation="unconsolidate", consolidation_id=pass_id, **fields),
        ),
        (
            "conversation-memory",
            ConversationRequest(operation="search", query=FACT_QUERY, top_k=20, **fields),
        ),
        ("conversation-memory", ConversationRequest(operation="list", limit=200, **fields)),
    ]


def id_ops(fields: dict[str, Any], theirs: Canaries) -> list[tuple[str, WireModel]]:
    """Another owner's record ids, named outright."""
    stolen = FactInput(content="stolen")
    return [
        ("fact-memory", FactRequest(operation="get", ids=[theirs.fact], **fields)),
        ("fact-memory", FactRequest(operation="history", fact_id=theirs.fact, **fields)),
        (
            "fact-memory",
            FactRequest(operation="update", fact_id=theirs.fact, fact=stolen, **fields),
        ),
        ("fact-memory", FactRequest(operation="delete", ids=[theirs.fact], **fields)),
        ("episode-memory", EpisodeRequest(operation="get", ids=[theirs.episode], **fields)),
        ("episode-memory", EpisodeRequest(operation="delete", ids=[theirs.episode], **fields)),
    ]


def conversation_ops(fields: dict[str, Any], conversation: str) -> list[tuple[str, WireModel]]:
    """Another owner's conversation id (which may be the attacker's own id too)."""
    conv = {**fields, "conversation_id": conversation}
    return [
        ("fact-memory", FactRequest(operation="retrieve", query=FACT_QUERY, top_k=20, **conv)),
        ("fact-memory", FactRequest(operation="list", limit=1000, **conv)),
        (
            "episode-memory",
            EpisodeRequest(operation="retrieve", goal=EPISODE_GOAL, top_k=20, **conv),
        ),
        ("conversation-memory", ConversationRequest(operation="get", **conv)),
        (
            "conversation-memory",
            ConversationRequest(operation="search", query=FACT_QUERY, top_k=20, **conv),
        ),
        (
            "conversation-memory",
            ConversationRequest(operation="update-summary", summary="stolen", **conv),
        ),
        ("conversation-memory", ConversationRequest(operation="end", **conv)),
        (
            "conversation-memory",
            ConversationRequest(
                operation="append", turn_id="t-x", query="hi", take_notices=True, **conv
            ),
        ),
    ]


def _same_as_absent(reply: WireModel, foreign: str, absent: WireModel, made_up: str) -> bool:
    return reply.encode().decode().replace(foreign, "ID") == absent.encode().decode().replace(
        made_up, "ID"
    )


# Generated owners against every service, each example over the real bus: 70-110 s alone on a
# loaded 2-core machine, which 4 workers can stretch past the suite's 300 s.
@pytest.mark.timeout(900)
async def test_no_owner_reads_or_changes_another_owners_memory(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    request: pytest.FixtureRequest,
) -> None:
    owners = owner_set(max(1, request.config.getoption("--fuzz-examples") // 5))
    async with services(transport, tmp_path, unique, registry) as svc:
        canaries = {o.key: await write_canaries(svc, o) for o in owners}
        before = {o.key: await snapshot(svc, o, canaries[o.key]) for o in owners}
        secrets = {o.key: (o.token, canaries[o.key].fact, canaries[o.key].episode) for o in owners}

        told = dict.fromkeys(before, 0)  # an owner's notice, in the owner's own replies
        for n, attacker in enumerate(owners):
            fields = attacker.fields(n)
            foreign = [s for key, found in secrets.items() if key != attacker.key for s in found]
            victims = [o for o in owners if o.key != attacker.key]
            sent = owner_ops(fields)
            for victim in victims:
                sent += id_ops(fields, canaries[victim.key])
            for conversation in sorted({v.conversation for v in victims}):
                sent += conversation_ops(fields, conversation)
            replies = [await svc.ask(service, attacker.workspace, r) for service, r in sent]
            for (_, r), reply in zip(sent, replies, strict=True):
                # Ids the request named may be echoed (as "missing"); nothing else may show.
                text, asked = reply.encode().decode(), r.encode().decode()
                leaked = [s for s in foreign if s in text and s not in asked]
                assert not leaked, (attacker, r, text)
            told[attacker.key] += sum(notice_id(attacker) in r.encode().decode() for r in replies)
            # The queries do find memory: the attacker's own canary, where it has one.
            assert attacker.token in replies[0].encode().decode()  # fact retrieve
            assert attacker.token in replies[2].encode().decode()  # ... by sentences too
            assert attacker.token in replies[5].encode().decode()  # episode retrieve
            # Another owner's record looks exactly like one that never existed.
            for victim in victims:
                theirs, made_up = canaries[victim.key].fact, str(uuid.uuid4())
                for kind in ("get", "history"):
                    real = FactRequest(operation=kind, ids=[theirs], fact_id=theirs, **fields)
                    fake = FactRequest(operation=kind, ids=[made_up], fact_id=made_up, **fields)
                    assert _same_as_absent(
                        await svc.ask("fact-memory", attacker.workspace, real),
                        theirs,
                        await svc.ask("fact-memory", attacker.workspace, fake),
                        made_up,
                    ), (attacker, victim, kind)
            # Nobody else's memory changed (not even an access count).
            for other in victims:
                now = await snapshot(svc, other, canaries[other.key])
                assert now == before[other.key], (attacker, other)
            before[attacker.key] = await snapshot(svc, attacker, canaries[attacker.key])

        # Each owner's notice waited for its own next answer, or went to it: once.
        for o in owners:
            last = ConversationRequest(
                operation="append",
                turn_id="t-last",
                query="hi",
                take_notices=True,
                **o.fields(conversation_id=o.conversation),
            )
            reply = await svc.ok("conversation-memory", o.workspace, last)
            told[o.key] += notice_id(o) in reply.encode().decode()
            assert told[o.key] == 1, o
            before[o.key] = await snapshot(svc, o, canaries[o.key])

        # Purges and deletes by each owner, with every other owner's conversation id, take
        # only its own memory.
        gone: set[Scope] = set()
        for n, attacker in enumerate(owners):
            ws, fields = attacker.workspace, attacker.fields(n)
            for victim in owners:
                conv = {**fields, "conversation_id": victim.conversation}
                await svc.ok(
                    "conversation-memory", ws, ConversationRequest(operation="delete", **conv)
                )
            await svc.ok("fact-memory", ws, FactRequest(operation="purge", **fields))
            await svc.ok("episode-memory", ws, EpisodeRequest(operation="purge", **fields))
            await svc.ok(
                "conversation-memory", ws, ConversationRequest(operation="purge", **fields)
            )
            gone.add(attacker.key)
            for other in owners:
                if other.key not in gone:
                    assert await snapshot(svc, other, canaries[other.key]) == before[other.key]


# -- the playbook: never beyond its collection (users: tests/test_playbook_privacy.py) ----


async def test_no_collection_or_workspace_reads_or_changes_another_playbook(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    request: pytest.FixtureRequest,
) -> None:
    """A playbook is one workspace + collection (+ owner, see test_playbook_privacy), and
    every playbook operation stays inside it."""
    owners = owner_set(max(1, request.config.getoption("--fuzz-examples") // 5))
    books = {(o.workspace, o.collection): o for o in owners}
    async with services(transport, tmp_path, unique, registry) as svc:
        ids: dict[tuple[str, str], str] = {}
        for key, o in books.items():
            delta = Delta(
                delta_id=f"canary-{o.token}",
                operations=[DeltaOperation(type="ADD", content=f"Check code word {o.token}.")],
            )
            done = await svc.ok(
                "playbook-memory",
                o.workspace,
                PlaybookRequest(operation="apply-delta", delta=delta, **o.fields()),
            )
            ids[key] = done.changes[0].bullet_id

        async def state(o: Owner) -> str:
            listed = PlaybookRequest(operation="list", limit=1000, **o.fields())
            found: PlaybookResponse = await svc.ok("playbook-memory", o.workspace, listed)
            return found.encode().decode()

        before = {key: await state(o) for key, o in books.items()}
        for n, (key, attacker) in enumerate(books.items()):
            fields = attacker.fields(n)
            foreign = [s for k, o in books.items() if k != key for s in (o.token, ids[k])]
            sent = [
                PlaybookRequest(operation="retrieve", query="code word", top_k=200, **fields),
                PlaybookRequest(operation="list", limit=1000, **fields),
                PlaybookRequest(
                    operation="get", ids=[i for k, i in ids.items() if k != key], **fields
                ),
                PlaybookRequest(operation="history", limit=1000, **fields),
                PlaybookRequest(operation="show", version=1, **fields),
                PlaybookRequest(operation="stats", **fields),
                PlaybookRequest(operation="rollback", version=0, **fields),
            ]
            for r in sent:
                reply = await svc.ask("playbook-memory", attacker.workspace, r)
                text, asked = reply.encode().decode(), r.encode().decode()
                assert not [s for s in foreign if s in text and s not in asked], (attacker, r)
                if r.operation == "retrieve":  # the query does find the attacker's own
                    assert attacker.token in text
            for k, o in books.items():
                if k != key:
                    assert await state(o) == before[k], (attacker, o)
            before[key] = await state(attacker)


# -- through the agent: its memory recall and its memory tools ---------------------------

TOOLS = (
    ("RetrieveFacts", {"query": FACT_QUERY}),
    ("RecallEpisodes", {"query": EPISODE_GOAL}),
    ("StoreFact", {"fact_content": "The attacker was here."}),
)


def tool_user(request: TextCompletionRequest) -> str:
    """Agent prompts: each memory tool once, in order, then an answer."""
    for name, args in TOOLS:
        if f"Action: {name}" not in request.prompt:
            return f"Thought: ask memory\nAction: {name}\nArgs: {json.dumps(args)}"
    return "Thought: done\nFinal Answer: I checked."


@contextlib.asynccontextmanager
async def clients_of(stack: Stack) -> AsyncIterator[Services]:
    kinds = {
        "fact-memory": FactResponse,
        "episode-memory": EpisodeResponse,
        "conversation-memory": ConversationResponse,
    }
    found: dict[str, dict[str, RequestResponseClient[Any, Any]]] = {}
    try:
        for name, response in kinds.items():
            t = stack.topics[name]
            client: RequestResponseClient[Any, Any] = RequestResponseClient(
                stack.transport, t["request"], t["response"], response
            )
            await client.start()
            found[name] = {"default": client}
        yield Services(found)
    finally:
        for by_ws in found.values():
            for client in by_ws.values():
                await client.close()


# Generated owners against every service, each example over the real bus: 70-110 s alone on a
# loaded 2-core machine, which 4 workers can stretch past the suite's 300 s.
@pytest.mark.timeout(900)
async def test_the_agent_never_puts_another_owners_memory_in_a_prompt(
    transport: PulsarTransport, tmp_path: Path, unique: str, request: pytest.FixtureRequest
) -> None:
    drawn = owner_set(max(1, request.config.getoption("--fuzz-examples") // 5))
    owners = [o for o in drawn if o.workspace == "ws-a"]  # the stack's one workspace
    owners = [Owner("default", o.collection, o.user, o.conversation, o.token) for o in owners]
    async with (
        agent_stack(transport, tmp_path, unique, script=tool_user) as stack,
        clients_of(stack) as svc,
    ):
        canaries = {o.key: await write_canaries(svc, o) for o in owners}
        tokens = {o.key: o.token for o in owners}
        conversations = sorted({o.conversation for o in owners})
        told = dict.fromkeys(tokens, 0)  # the quota notice on each owner's conversation
        for n, asker in enumerate(owners):
            foreign = [t for key, t in tokens.items() if key != asker.key]
            for conversation in [asker.conversation, *conversations]:
                seen = len(stack.llm.requests)
                reply = await stack.ask(FACT_QUERY, conversation_id=conversation, **asker.fields(n))
                answer, _, note = reply[-1].content.partition("\n\n")
                assert reply[-1].error is None and answer == "I checked."
                if note:  # only in the asker's own conversation: the notice is theirs
                    assert conversation == asker.conversation, (asker, conversation, note)
                    told[asker.key] += 1
                prompts = [r.prompt for r in stack.llm.requests[seen:]]
                assert len(prompts) == len(TOOLS) + 1
                text = "\n".join(prompts)
                assert not [t for t in foreign if t in text], (asker, conversation)
                # Recall and tools found the asker's own memory: the queries match.
                assert asker.token in prompts[0] and asker.token in prompts[1]
        assert told == dict.fromkeys(tokens, 1)  # each owner told once, in their next answer
        # Every owner's memory is as written, and the tools' stores stayed with the asker.
        for owner in owners:
            mine = await svc.ok(
                "fact-memory", "default", FactRequest(operation="list", limit=100, **owner.fields())
            )
            assert sorted(f.content for f in mine.facts) == sorted(
                [owner.fact, "The attacker was here."]
            )
            assert canaries[owner.key].fact in {f.id for f in mine.facts}


# -- no request path reaches the all-owners scope ------------------------------------------

#: The only modules that may build an AllOwners: maintenance, never a request handler.
BUILDS_ALL_OWNERS = {"memory_services/scope_registry.py", "memory_services/facts/quota.py"}


def test_only_maintenance_modules_build_an_all_owners_scope() -> None:
    root = Path(__file__).resolve().parent.parent
    builders = set()
    for package in ("react_mem", "memory_services"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    func = node.func
                    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                    if name == "AllOwners":
                        builders.add(path.relative_to(root).as_posix())
    assert builders == BUILDS_ALL_OWNERS
