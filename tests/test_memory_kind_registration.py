"""A new memory kind is one registration, made as the built-in ones are: a ``MemoryKind``
declared here, in this file alone (as its package's ``kind.py`` would, naming its
``source.py``'s ``MemorySource`` and its client by import, registered by one
``pyproject.toml`` line), brings its processor to the runtime, its queues to every
generated deployment file, its forget to ``memory forget``, and through its source its
``agent-mem`` keys (default, bounds, the closest-key hint), its client spec, its recall and
its section of the agent's prompt. Nothing else is edited for it. The registry is a value:
the kinds with it and the kinds without it live side by side, whatever was built first."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Annotated, Any, cast

import pytest
from pydantic import BaseModel, Field

from devtools import topology
from react_mem.agent.config import AgentMemConfig, Key
from react_mem.agent.items import Item, clean
from react_mem.agent.prompt import Layout, render_context, user_prompt
from react_mem.agent.recall import MemoryRecall
from react_mem.agent.service import AgentProcessor
from react_mem.agent.settings import client_specs
from react_mem.agent.sources import Ask, MemorySource, Sources, setting
from react_mem.bus.in_process import InProcessTransport
from react_mem.clients.base import Service, ServiceClient
from react_mem.commands import forget
from react_mem.errors import ConfigurationError
from react_mem.ping.service import PingProcessor
from react_mem.processor.base import Processor
from react_mem.processor.flow import Flow
from react_mem.processor.kinds import MemoryKind, MemoryKinds
from react_mem.processor.runtime import resolve_processor
from react_mem.processor.specs import RequestResponseSpec
from react_mem.schema.agent import MemoryRef
from react_mem.schema.forget import Forgotten
from react_mem.schema.scope import Scope
from react_mem.tokens import TokenCounter

ADA = Scope("ws", "default", "ada", "conv-1")
BOB = Scope("ws", "default", "bob", "conv-9")


class NoteRequest(BaseModel):
    user: str = ""
    top_k: int = 0


class NoteResponse(BaseModel):
    notes: list[str] = Field(default_factory=list)


#: The throwaway kind's store, per owner (its service would hold it).
NOTES = {"ada": ["keeps bees", "prefers tea", "lives in Lyon", "fears wasps"], "bob": ["x"]}


async def fetch_notes(ask: Ask) -> list[Item]:
    notes = NOTES.get(ask.scope.user or "", [])[: ask.top_k]
    prefix = setting(ask.cfg, "notes-prefix")
    return [
        Item(f"- {prefix}{clean(n)}", MemoryRef(kind="note", id=f"note-{i}", content=n))
        for i, n in enumerate(notes)
    ]


NOTE_MEMORY = Service("note-memory", NoteRequest, NoteResponse)


class NoteClient(ServiceClient[NoteRequest, NoteResponse]):
    service = NOTE_MEMORY

    async def forget(self, user: str, *, collection: str = "") -> Forgotten:
        raise AssertionError("not sent in these tests")


NOTES_SOURCE = MemorySource(
    name="notes",
    service=NOTE_MEMORY,
    title="Notes:",
    share=0.3,
    section=40,
    fetch=fetch_notes,
    top_k="notes-top-k",
    keys=(
        Key("notes-top-k", Annotated[int, Field(ge=0, le=50)], 2),
        Key("notes-prefix", str, "note: "),
    ),
)


class FlowWith:
    def __init__(self, *clients: str) -> None:
        self.clients = set(clients)

    def has_client(self, request: str) -> bool:
        return request in self.clients


class Counter(TokenCounter):
    """One token a word."""

    def count(self, text: str) -> int:
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def processor() -> type[Processor]:
    """The kind's processor, imported when started (the ping processor stands in)."""
    return PingProcessor


#: The kind's one registration (its package's ``kind.py``).
NOTES_KIND = MemoryKind(
    name="note-memory",
    processor=processor,
    position=60,
    source=NOTES_SOURCE,
    client=NoteClient,
)

#: What the installed packages register, read once; then with the new kind's entry point.
INSTALLED = MemoryKinds.from_entry_points()
WITH_NOTES = INSTALLED.plus(NOTES_KIND)
SOURCES = Sources.of(WITH_NOTES)


def test_one_registration_reaches_the_runtime_the_topology_and_forget() -> None:
    assert resolve_processor("note-memory", WITH_NOTES) is PingProcessor
    assert SOURCES.sources[-1] is NOTES_SOURCE
    agent = topology.node("agent-mem", WITH_NOTES).topics
    assert {"note-memory-request", "note-memory-response"} <= {t.spec for t in agent}
    assert topology.node("note-memory", WITH_NOTES).deploy is not None
    assert "note-memory" in topology.interfaces(WITH_NOTES)
    assert forget.targets("ws", "default", WITH_NOTES)["note-memory"].request == (
        "request:tg:note-memory:ws:default"
    )
    assert forget.clients(WITH_NOTES)["note-memory"] is NoteClient


def test_the_runtime_hands_the_agent_the_kinds_it_read() -> None:
    """What ``supervise`` does: ``create`` with the kinds read at start-up."""
    settings = AgentProcessor.Settings.load({"id": "agent-mem"})
    agent = AgentProcessor.create(settings, InProcessTransport(), WITH_NOTES)
    clients = {s.request for s in agent.specifications if isinstance(s, RequestResponseSpec)}
    assert {"note-memory-request", "fact-memory-request"} <= clients
    assert agent.layout.order[-1] == "notes"
    assert setting(agent.workspace("ws").config, "notes-top-k") == 2
    plain = AgentProcessor.create(settings, InProcessTransport(), INSTALLED)
    assert "notes" not in plain.layout.order
    with pytest.raises(KeyError, match="notes-top-k"):
        setting(plain.workspace("ws").config, "notes-top-k")


def test_without_its_kind_nothing_of_it_is_known_whatever_was_built_first() -> None:
    parsed = AgentMemConfig.parse({"notes-top-k": "4"}, keys=SOURCES.keys)
    assert setting(parsed, "notes-top-k") == 4
    without = Sources.of(INSTALLED)  # built after the one with notes: it changes nothing
    assert NOTES_SOURCE not in without.sources
    with pytest.raises(ConfigurationError, match="unknown agent-mem key 'notes-top-k'"):
        AgentMemConfig.parse({"notes-top-k": "4"}, keys=without.keys)
    assert AgentMemConfig.parse({"notes-top-k": "4"}, keys=SOURCES.keys) == parsed
    with pytest.raises(ConfigurationError, match="note-memory"):
        resolve_processor("note-memory", INSTALLED)
    assert "note-memory" not in forget.targets("ws", "default", INSTALLED)
    assert "note-memory-request" not in {spec.request for spec in client_specs(without)}


def test_its_keys_are_agent_mem_keys_with_its_kind() -> None:
    keys = SOURCES.keys
    assert AgentMemConfig.parse({}, keys=keys).declared("notes-top-k") == 2  # its default
    cfg = AgentMemConfig.parse({"notes-top-k": "4", "fact-retrieval-top-k": "1"}, keys=keys)
    assert (setting(cfg, "notes-top-k"), cfg.fact_retrieval_top_k) == (4, 1)
    with pytest.raises(ConfigurationError, match="'notes-top-kk'; did you mean 'notes-top-k'"):
        AgentMemConfig.parse({"notes-top-kk": "4"}, keys=keys)
    with pytest.raises(ConfigurationError, match="notes-top-k: Input should be less than"):
        AgentMemConfig.parse({"notes-top-k": "51"}, keys=keys)
    assert "note-memory-request" in {spec.request for spec in client_specs(SOURCES)}


def test_a_kind_or_source_name_is_taken_once() -> None:
    with pytest.raises(ConfigurationError, match="registered twice: note-memory"):
        WITH_NOTES.plus(NOTES_KIND)
    with pytest.raises(ConfigurationError, match="named twice: notes"):
        Sources([*SOURCES, NOTES_SOURCE])


def test_a_key_the_config_has_cannot_be_declared_again() -> None:
    taken = MemorySource(
        name="again",
        service=Service("again-memory", NoteRequest, NoteResponse),
        title="Again:",
        share=0.1,
        section=90,
        fetch=fetch_notes,
        keys=(Key("fact-retrieval-top-k", int, 1),),
    )
    with pytest.raises(ConfigurationError, match="'fact-retrieval-top-k' is taken"):
        Sources([*SOURCES, taken])
    twice = dataclasses.replace(taken, name="twice", keys=(NOTES_SOURCE.keys[0],))
    with pytest.raises(ConfigurationError, match="'notes-top-k' is taken"):
        Sources([*SOURCES, twice])


def test_a_source_that_is_no_memory_source_is_refused() -> None:
    odd = dataclasses.replace(NOTES_KIND, name="odd-memory", source="module:NOTES")
    with pytest.raises(ConfigurationError, match="odd-memory is not a MemorySource"):
        Sources.of(INSTALLED.plus(odd))


async def test_it_is_recalled_for_its_owner_into_the_prompt() -> None:
    keys = SOURCES.keys
    cfg = AgentMemConfig.parse({"notes-top-k": "3", "notes-prefix": "N: "}, keys=keys)
    flow = cast(Flow, FlowWith("note-memory-request"))  # the built-in services are absent
    recall = await MemoryRecall(flow, None, cfg, SOURCES).recall("What do I keep?", ADA)
    assert [i.text for i in recall.items["notes"]] == [
        "- N: keeps bees",
        "- N: prefers tea",
        "- N: lives in Lyon",
    ]
    assert recall.missed.keys() == {"playbook", "facts", "episodes"}  # absent from the flow

    context = render_context(Counter(), 200, recall.items, Layout.of(SOURCES))
    prompt = user_prompt(context.memory, [], "What do I keep?")
    assert "Notes:\n- N: keeps bees\n- N: prefers tea\n- N: lives in Lyon" in prompt
    assert [ref.kind for ref in context.used] == ["note"] * 3
    assert "wasps" not in prompt and "- N: x" not in prompt  # top-k, and only Ada's

    off = AgentMemConfig.parse({"notes-top-k": "0"}, keys=keys)
    recall = await MemoryRecall(flow, None, off, SOURCES).recall("What do I keep?", ADA)
    assert "notes" not in recall.items


async def test_its_section_shares_the_budget_with_the_built_in_ones() -> None:
    sections: dict[str, Any] = {
        "facts": [Item(f"- fact {n} " + "word " * 8, MemoryRef(id=str(n))) for n in range(9)],
        "notes": [Item(f"- note {n} " + "word " * 8, MemoryRef(kind="note")) for n in range(9)],
    }
    memory = render_context(Counter(), 60, sections, Layout.of(SOURCES)).memory
    assert memory.index("Long-term Facts:") < memory.index("Notes:")  # by their sections
    assert "- fact 0" in memory and "- note 0" in memory  # neither crowds the other out
