"""The agent's memory sources are declared once, each in its kind's package, and read once
from the memory kinds (``react_mem.agent.sources.Sources``): the recall fan-out, the client
specs and the prompt layout all follow them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from react_mem.agent import prompt
from react_mem.agent.config import AgentMemConfig
from react_mem.agent.items import Item
from react_mem.agent.recall import MemoryRecall
from react_mem.agent.settings import client_specs
from react_mem.agent.sources import Ask, MemorySource, Sources, setting
from react_mem.clients.base import Service
from react_mem.processor.flow import Flow
from react_mem.schema.agent import MemoryRef
from react_mem.schema.facts import FactRequest, FactResponse
from react_mem.schema.scope import Scope
from tests.support.kinds import INSTALLED, LAYOUT, SOURCES

SCOPE = Scope("ws", "default", "ada", "conv-1")


class FlowWith:
    """A flow that has exactly the named clients (the fetchers below never call them)."""

    def __init__(self, *clients: str) -> None:
        self.clients = set(clients)

    def has_client(self, request: str) -> bool:
        return request in self.clients


class Embedder:
    """Embeds only once ``ready`` is set: by the source that needs no vector."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        await self.ready.wait()
        return [[1.0, 0.0] for _ in texts]


def source(name: str, fetch: Any, **kw: Any) -> MemorySource:
    return MemorySource(
        name=name,
        service=Service(f"{name}-memory", FactRequest, FactResponse),
        title=f"{name}:",
        share=0.5,
        section=kw.pop("section", 50),
        fetch=fetch,
        **kw,
    )


def item(text: str) -> Item:
    return Item(f"- {text}", MemoryRef(kind="fact", id=text, content=text))


def test_every_declared_key_is_an_agent_mem_key() -> None:
    cfg = AgentMemConfig.parse({}, keys=SOURCES.keys)
    for s in SOURCES:
        for key in (s.top_k, s.min_score, s.share_key):
            if key is not None:
                setting(cfg, key)  # raises KeyError for a key the config does not have
    assert setting(cfg, "fact-retrieval-top-k") == cfg.fact_retrieval_top_k


def test_the_built_in_kinds_declare_their_sources_in_their_own_packages() -> None:
    """As a new kind does: ``memory_services/<kind>/source.py``, named by its ``kind.py``."""
    packages = {
        "fact-memory": "facts",
        "episode-memory": "episodes",
        "conversation-memory": "conversations",
        "playbook-memory": "playbook",
    }
    named = {k.name: k.source for k in INSTALLED if k.source is not None}
    assert {k: cast(MemorySource, s).fetch.__module__ for k, s in named.items()} == {
        k: f"memory_services.{p}.source" for k, p in packages.items()
    }
    assert {s.name for s in SOURCES} == {"facts", "episodes", "conversation", "playbook"}


def test_clients_and_layout_follow_the_kinds() -> None:
    requests = {spec.request for spec in client_specs(SOURCES)}
    assert {s.client for s in SOURCES} <= requests
    assert LAYOUT.order == ("playbook", "facts", "episodes", "conversation")
    assert {s.name: s.title for s in SOURCES} == LAYOUT.titles
    # Leftover budget: larger shares first, the configured (playbook) share last.
    assert LAYOUT.fill == ("facts", "conversation", "episodes", "playbook")
    assert prompt.Layout.of(Sources()).order == ()  # no kinds, no sections


async def test_a_registered_source_is_asked_with_its_settings_and_the_vector() -> None:
    asked: dict[str, Ask] = {}
    embedder = Embedder()

    async def by_id(ask: Ask) -> list[Item]:
        asked["by-id"] = ask
        embedder.ready.set()  # the vector can only come after this source was asked
        return [item("turn")]

    async def by_vector(ask: Ask) -> list[Item]:
        asked["by-vector"] = ask
        return [item("fact")]

    sources = [
        source("by-id", by_id),
        source(
            "by-vector",
            by_vector,
            top_k="fact-retrieval-top-k",
            min_score="fact-min-score",
            embeds=lambda cfg: True,
        ),
        source("off", by_vector, top_k="episode-retrieval-top-k"),
        source("absent", by_vector, top_k="fact-retrieval-top-k"),
    ]
    cfg = AgentMemConfig(**{"fact-retrieval-top-k": 7, "episode-retrieval-top-k": 0})
    flow = cast(Flow, FlowWith("by-id-memory-request", "by-vector-memory-request"))
    recall = await MemoryRecall(flow, cast(Any, embedder), cfg, sources).recall("q?", SCOPE)
    assert recall.items == {"by-id": [item("turn")], "by-vector": [item("fact")]}
    assert asked["by-id"].vector is None and asked["by-id"].top_k == 0
    assert asked["by-vector"].vector == [1.0, 0.0]
    assert (asked["by-vector"].top_k, asked["by-vector"].min_score) == (7, cfg.fact_min_score)
    assert recall.missed == {"off": "not in this flow", "absent": "not in this flow"}
    assert set(recall.timings) == {"by-id", "embed", "by-vector"}


async def test_a_failing_source_thins_the_context() -> None:
    async def broken(ask: Ask) -> list[Item]:
        raise RuntimeError("store is down")

    async def fine(ask: Ask) -> list[Item]:
        return [item("kept")]

    flow = cast(Flow, FlowWith("a-memory-request", "b-memory-request"))
    sources = [source("a", broken), source("b", fine)]
    recall = await MemoryRecall(flow, None, AgentMemConfig(), sources).recall("q?", SCOPE)
    assert recall.items == {"b": [item("kept")]}
    assert recall.missed == {"a": "RuntimeError: store is down"}


class Words:
    """A token counter of words (the render's seam), counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[: max(max_tokens, 0)])


async def test_the_embedding_starts_before_the_previous_turn_and_the_sources() -> None:
    """The model runs while the previous turn is awaited and the conversation is asked;
    no source is asked before the previous turn (a follow-up's conversation holds it)."""
    events: list[str] = []

    class Recorder:
        async def embed(self, texts: list[str]) -> list[list[float]]:
            events.append("embed")
            return [[1.0, 0.0] for _ in texts]

    async def previous_turn() -> None:
        events.append("previous turn")

    async def by_id(ask: Ask) -> list[Item]:
        events.append("by-id")
        return [item("turn")]

    async def by_vector(ask: Ask) -> list[Item]:
        events.append("by-vector")
        return [item("fact")]

    sources = [source("by-id", by_id), source("by-vector", by_vector, embeds=lambda c: True)]
    flow = cast(Flow, FlowWith("by-id-memory-request", "by-vector-memory-request"))
    recall = await MemoryRecall(flow, cast(Any, Recorder()), AgentMemConfig(), sources).recall(
        "q?", SCOPE, first=previous_turn()
    )
    assert events == ["embed", "previous turn", "by-id", "by-vector"]
    assert list(recall.items) == ["by-id", "by-vector"]


async def test_what_came_before_the_vector_is_counted_before_the_searches_are_asked() -> None:
    """The conversation's items come in while the question is embedded: they are counted
    then, not after the searches by vector are sent (that work on the loop held the bus
    client's threads back from sending them, on two cores)."""
    events: list[str] = []
    embedder = Embedder()

    class Logged(Words):
        def count(self, text: str) -> int:
            events.append(f"count {text}")
            return super().count(text)

    async def by_id(ask: Ask) -> list[Item]:
        embedder.ready.set()  # the vector comes only after this source's items are in
        return [item("turn")]

    async def by_vector(ask: Ask) -> list[Item]:
        events.append("by-vector asked")
        return [item("fact")]

    sources = [source("by-id", by_id), source("by-vector", by_vector, embeds=lambda c: True)]
    flow = cast(Flow, FlowWith("by-id-memory-request", "by-vector-memory-request"))
    recall = await MemoryRecall(
        flow, cast(Any, embedder), AgentMemConfig(), sources, cast(Any, Logged())
    ).recall("q?", SCOPE)
    assert events == ["count - turn", "by-vector asked", "count - fact"]
    assert [i.tokens for i in recall.items["by-id"]] == [2]


async def test_recall_counts_the_items_tokens_up_to_the_budget() -> None:
    texts = [f"fact number {n} " + "word " * n for n in range(30)]

    async def facts(ask: Ask) -> list[Item]:
        return [item(t) for t in texts]

    counter = Words()
    cfg = AgentMemConfig(**{"memory-token-budget": 100})
    flow = cast(Flow, FlowWith("facts-memory-request"))
    sources = [source("facts", facts)]
    recall = await MemoryRecall(flow, None, cfg, sources, cast(Any, counter)).recall("q?", SCOPE)
    got = recall.items["facts"]
    assert [i.text for i in got] == [item(t).text for t in texts]  # the same items, in order
    counted = [i for i in got if i.tokens is not None]
    assert [i.tokens for i in counted] == [len(i.text.split()) for i in counted]
    assert sum(i.tokens or 0 for i in counted[:-1]) <= 100 < sum(i.tokens or 0 for i in counted)
    assert all(i.tokens is None for i in got[len(counted) :])  # past the budget: never chosen


@settings(max_examples=50, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 40), max_size=12),
    budget=st.integers(0, 300),
    counted=st.integers(0, 12),
)
def test_the_render_of_counted_items_is_the_render_of_uncounted_ones(
    lengths: list[int], budget: int, counted: int
) -> None:
    """Tokens counted in recall spare the render its counts and change nothing it writes."""
    plain = {
        "facts": [item("fact " + "word " * n) for n in lengths],
        "conversation": [item("turn " + "said " * n) for n in reversed(lengths)],
    }
    words = Words()
    ahead = {
        name: [
            Item(i.text, i.ref, i.group, words.count(i.text) if n < counted else None)
            for n, i in enumerate(items)
        ]
        for name, items in plain.items()
    }
    before, after = Words(), Words()
    expected = prompt.render_context(cast(Any, before), budget, plain, LAYOUT)
    assert prompt.render_context(cast(Any, after), budget, ahead, LAYOUT) == expected
    assert after.calls <= before.calls
