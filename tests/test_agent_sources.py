"""The agent's memory sources are declared once, each in its kind's package, and read once
from the memory kinds (``react_mem.agent.sources.Sources``): the recall fan-out, the client
specs and the prompt layout all follow them."""

from __future__ import annotations

import asyncio
from typing import Any, cast

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
