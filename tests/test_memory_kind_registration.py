"""A new memory kind is one registration: a ``MemoryKind`` declared here, in this file
alone (as its package's ``kind.py`` would, registered by one ``pyproject.toml`` line), brings
its processor to the runtime, its queues to every generated deployment file, its forget to
``memory forget``, and through its ``MemorySource`` its ``agent-mem`` keys (default, bounds,
the closest-key hint), its client spec, its recall and its section of the agent's prompt.
Nothing else is edited for it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated, Any, cast

import pytest
from pydantic import BaseModel, Field

from devtools import topology
from react_mem.agent.config import AgentMemConfig, Key
from react_mem.agent.items import Item, clean
from react_mem.agent.memory import MemoryRecall
from react_mem.agent.prompt import render_context, user_prompt
from react_mem.agent.settings import client_specs
from react_mem.agent.sources import Ask, MemorySource, register, registered, setting
from react_mem.clients.base import Service, ServiceClient
from react_mem.commands import forget
from react_mem.errors import ConfigurationError
from react_mem.processor import kinds
from react_mem.processor.flow import Flow
from react_mem.processor.kinds import MemoryKind
from react_mem.processor.runtime import resolve_processor
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


#: The kind's one registration (its package's ``kind.py``; the processor stands in).
NOTES_KIND = MemoryKind(
    name="note-memory",
    processor="react_mem.ping.service:PingProcessor",
    position=60,
    source=f"{__name__}:NOTES_SOURCE",
    client=f"{__name__}:NoteClient",
)


@pytest.fixture
def notes() -> Iterator[MemorySource]:
    kinds.register(NOTES_KIND)  # what its entry point does
    registered()  # the agent reads the sources when it starts
    try:
        yield NOTES_SOURCE
    finally:
        kinds.unregister(NOTES_KIND.name)
        registered()


def test_one_registration_reaches_the_runtime_the_topology_and_forget(
    notes: MemorySource,
) -> None:
    assert resolve_processor("note-memory").__name__ == "PingProcessor"
    assert registered()[-1] is notes
    agent = topology.node("agent-mem").topics
    assert {"note-memory-request", "note-memory-response"} <= {t.spec for t in agent}
    assert topology.node("note-memory").deploy is not None
    assert "note-memory" in topology.interfaces()
    assert forget.targets("ws", "default")["note-memory"].request == (
        "request:tg:note-memory:ws:default"
    )


def test_a_registered_source_goes_with_its_kind() -> None:
    kinds.register(NOTES_KIND)
    assert registered()[-1] is NOTES_SOURCE
    assert AgentMemConfig().declared("notes-top-k") == 2
    kinds.unregister(NOTES_KIND.name)
    assert NOTES_SOURCE not in registered()
    with pytest.raises(ConfigurationError, match="unknown agent-mem key 'notes-top-k'"):
        AgentMemConfig.parse({"notes-top-k": "4"})
    with pytest.raises(ConfigurationError, match="note-memory"):
        resolve_processor("note-memory")


def test_its_keys_are_agent_mem_keys_once_registered(notes: MemorySource) -> None:
    assert AgentMemConfig().declared("notes-top-k") == 2  # its default
    cfg = AgentMemConfig.parse({"notes-top-k": "4", "fact-retrieval-top-k": "1"})
    assert (setting(cfg, "notes-top-k"), cfg.fact_retrieval_top_k) == (4, 1)
    with pytest.raises(ConfigurationError, match="'notes-top-kk'; did you mean 'notes-top-k'"):
        AgentMemConfig.parse({"notes-top-kk": "4"})
    with pytest.raises(ConfigurationError, match="notes-top-k: Input should be less than"):
        AgentMemConfig.parse({"notes-top-k": "51"})
    assert "note-memory-request" in {spec.request for spec in client_specs()}
    with pytest.raises(ConfigurationError, match="'notes' is registered"):
        register(notes)  # a source added by hand cannot take a kind's name


def test_unregistered_its_keys_are_unknown() -> None:
    assert NOTES_SOURCE not in registered()
    with pytest.raises(ConfigurationError, match="unknown agent-mem key 'notes-top-k'"):
        AgentMemConfig.parse({"notes-top-k": "4"})


def test_a_key_the_config_has_cannot_be_declared_again() -> None:
    taken = MemorySource(
        name="again",
        service=Service("again-memory", NoteRequest, NoteResponse),
        title="Again:",
        share=0.1,
        fetch=fetch_notes,
        keys=(Key("fact-retrieval-top-k", int, 1),),
    )
    with pytest.raises(ConfigurationError, match="'fact-retrieval-top-k' is taken"):
        register(taken)
    assert taken not in registered()


async def test_it_is_recalled_for_its_owner_into_the_prompt(notes: MemorySource) -> None:
    cfg = AgentMemConfig.parse({"notes-top-k": "3", "notes-prefix": "N: "})
    flow = cast(Flow, FlowWith("note-memory-request"))  # the built-in services are absent
    recall = await MemoryRecall(flow, None, cfg).recall("What do I keep?", ADA)
    assert [i.text for i in recall.items["notes"]] == [
        "- N: keeps bees",
        "- N: prefers tea",
        "- N: lives in Lyon",
    ]
    assert recall.missed.keys() == {"playbook", "facts", "episodes"}  # absent from the flow

    context = render_context(Counter(), 200, recall.items)
    prompt = user_prompt(context.memory, [], "What do I keep?")
    assert "Notes:\n- N: keeps bees\n- N: prefers tea\n- N: lives in Lyon" in prompt
    assert [ref.kind for ref in context.used] == ["note"] * 3
    assert "wasps" not in prompt and "- N: x" not in prompt  # top-k, and only Ada's

    off = AgentMemConfig.parse({"notes-top-k": "0"})
    recall = await MemoryRecall(flow, None, off).recall("What do I keep?", ADA)
    assert "notes" not in recall.items


async def test_its_section_shares_the_budget_with_the_built_in_ones(
    notes: MemorySource,
) -> None:
    sections: dict[str, Any] = {
        "facts": [Item(f"- fact {n} " + "word " * 8, MemoryRef(id=str(n))) for n in range(9)],
        "notes": [Item(f"- note {n} " + "word " * 8, MemoryRef(kind="note")) for n in range(9)],
    }
    memory = render_context(Counter(), 60, sections).memory
    assert memory.index("Long-term Facts:") < memory.index("Notes:")  # registration order
    assert "- fact 0" in memory and "- note 0" in memory  # neither crowds the other out
