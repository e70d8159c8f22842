"""The memory sources the agent recalls from at invocation start, declared once.

A source names its service (the flow's ``<service>-request`` client), its prompt section
(title, share of ``memory-token-budget``) and the ``agent-mem`` keys that size it, and says
how it is asked. The agent's client specs, its recall fan-out and the memory section's
layout all read ``registered()``: the sources the installed memory kinds name (see
:mod:`react_mem.processor.kinds`), then those added by ``register``. A source declares the
``agent-mem`` keys only it reads (``keys``: name, type with bounds, default); the config
accepts and validates them from then on. A new kind's source lives in its own package
(``memory_services/<kind>/source.py``, the one module there that may import this seam).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from react_mem.agent.config import AgentMemConfig, Key, declare, undeclare
from react_mem.agent.items import (
    Item,
    bullet_items,
    conversation_items,
    episode_items,
    fact_items,
    reflection_items,
)
from react_mem.clients.base import Service
from react_mem.clients.conversations import CONVERSATION_MEMORY, ConversationClient
from react_mem.clients.episodes import EPISODE_MEMORY, EpisodeClient
from react_mem.clients.facts import FACT_MEMORY, FactClient
from react_mem.clients.playbook import PLAYBOOK_MEMORY, Playbook, PlaybookClient
from react_mem.errors import ConfigurationError
from react_mem.processor.flow import Flow
from react_mem.processor.kinds import kinds, load
from react_mem.schema import AgentStep
from react_mem.schema.scope import Scope

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class Ask:
    """What one source is asked with."""

    flow: Flow
    cfg: AgentMemConfig
    question: str
    #: The question's embedding; ``None`` when the source does not embed or none was made.
    vector: list[float] | None
    scope: Scope
    #: The source's ``top_k`` and ``min_score`` settings (``0`` / ``None`` without a key).
    top_k: int = 0
    min_score: float | None = None
    #: The invocation's state so far (its recent steps; "" at a fresh start): episodes
    #: are recalled by question and state (seed 004).
    state: str = ""
    #: The request's task type (``AgentRequest.task_type``), empty when it names none.
    task_type: str = ""


#: Steps of the request's history that describe its state, and their length at most.
STATE_STEPS, STATE_CHARS = 3, 1000
#: Episode-memory's default goal limit: a question recalled by with a state is cut to it.
STATE_GOAL_CHARS = 4000


def recent_state(steps: Sequence[AgentStep]) -> str:
    """The last few steps as text (thought, action, observation), for episode recall."""
    parts = [
        " ".join(p for p in (s.thought, s.action, s.observation) if p) for s in steps[-STATE_STEPS:]
    ]
    return "\n".join(p for p in parts if p)[-STATE_CHARS:]


@dataclass(frozen=True)
class MemorySource:
    #: The prompt section, the key in ``Recall.items`` and the ``source`` metric label.
    name: str
    #: The memory service; the agent's client is ``<service>-request``/``-response``.
    service: Service[Any, Any]
    #: The section's title in the memory section of the prompt.
    title: str
    #: Share of the memory budget the section may use first; what one leaves, others take.
    share: float
    #: Asks the service; the answer as prompt items, best first.
    fetch: Callable[[Ask], Awaitable[list[Item]]]
    #: ``agent-mem`` key of how many records to recall; ``0`` turns the source off. A
    #: source without one is asked whenever its ``needs`` hold and is never "missed".
    top_k: str | None = None
    #: ``agent-mem`` key of the lowest similarity recalled.
    min_score: str | None = None
    #: Whether it is asked by the question's embedding (else at once, unembedded).
    embeds: Callable[[AgentMemConfig], bool] = lambda cfg: False
    #: Whether this request can be asked at all (a conversation needs its id).
    needs: Callable[[Scope], bool] = lambda scope: True
    #: ``agent-mem`` key of a share taken before the others (which scale down to the rest).
    share_key: str | None = None
    #: ``agent-mem`` keys only this source reads (its ``top_k`` / ``min_score`` among
    #: them, or its own settings, read with ``setting``); declared when it is registered.
    keys: tuple[Key, ...] = ()

    @property
    def client(self) -> str:
        return self.service.request

    def ask(self, flow: Flow, cfg: AgentMemConfig, question: str, scope: Scope) -> Ask | None:
        """The question for this source, or ``None`` when it is not asked."""
        top_k = int(setting(cfg, self.top_k)) if self.top_k else 0
        if (self.top_k and top_k <= 0) or not self.needs(scope):
            return None
        if not flow.has_client(self.client):
            return None
        min_score = float(setting(cfg, self.min_score)) if self.min_score else None
        return Ask(flow, cfg, question, None, scope, top_k, min_score)


def setting(cfg: AgentMemConfig, key: str) -> Any:
    """The value of ``agent-mem`` key ``key`` (hyphenated, as the config map spells it):
    one of the config's own fields or a key a registered source declared."""
    for name, info in AgentMemConfig.model_fields.items():
        if info.alias == key:
            return getattr(cfg, name)
    return cfg.declared(key)


def _owner(ask: Ask) -> Scope:
    """The request's owner across its conversations: recall spans all of them."""
    return dataclasses.replace(ask.scope, conversation=None)


async def _facts(ask: Ask) -> list[Item]:
    facts = await FactClient.of(ask.flow).retrieve(
        _owner(ask),
        ask.question,  # also beside the vector: hybrid ranking reads its words
        vector=ask.vector,
        top_k=ask.top_k,
        min_score=ask.min_score,
        retrieval=ask.cfg.retrieval(),
    )
    return fact_items(facts)


async def _episodes(ask: Ask) -> list[Item]:
    episodes = await EpisodeClient.of(ask.flow).retrieve(
        _owner(ask),
        # Also beside the vector: hybrid ranking reads its words (the service's goal limit).
        goal=ask.question[:STATE_GOAL_CHARS] if ask.state else ask.question,
        context=ask.state,
        vector=None if ask.state else ask.vector,  # with a state, the service embeds both
        top_k=ask.top_k,
        min_score=ask.min_score,
        retrieval=ask.cfg.retrieval(),
    )
    return episode_items(episodes) + await _recent_lessons(ask, {e.id for e in episodes})


async def _recent_lessons(ask: Ask, shown: set[str]) -> list[Item]:
    """Seed 003's recent reflections: the lessons of the owner's latest relevant episodes
    (of the request's task type, if it names one) that the recall above did not show."""
    cfg = ask.cfg
    if cfg.reflection_top_k <= 0:
        return []
    recent = await EpisodeClient.of(ask.flow).retrieve(
        _owner(ask),
        goal=ask.question,
        vector=ask.vector,
        top_k=cfg.reflection_top_k,
        min_score=ask.min_score,
        retrieval=cfg.retrieval(),
        task_type=ask.task_type or None,
        since=time.time() - cfg.reflection_window_days * SECONDS_PER_DAY,
    )
    return reflection_items([e for e in recent if e.id not in shown and e.lessons])


async def _playbook(ask: Ask) -> list[Item]:
    cfg, scope = ask.cfg, ask.scope
    which = Playbook(
        collection=scope.collection, context=cfg.playbook_context_scope, user=scope.user
    )
    bullets = await PlaybookClient.of(ask.flow).retrieve(
        which,
        ask.question,  # also when a vector is given: Jaccard relevance needs the text
        vector=ask.vector,
        top_k=ask.top_k,
        relevance=cfg.playbook_relevance,
        weights=cfg.playbook_weights,
    )
    return bullet_items(bullets)


async def _conversation(ask: Ask) -> list[Item]:
    turns = ask.cfg.conversation_turns
    conversation = await ConversationClient.of(ask.flow).get(ask.scope, limit=max(turns, 1))
    return conversation_items(conversation, turns)


PLAYBOOK = MemorySource(
    name="playbook",
    service=PLAYBOOK_MEMORY,
    title="Playbook (strategies learned from past tasks):",
    share=0.25,
    share_key="playbook-token-share",
    fetch=_playbook,
    top_k="playbook-top-k",
    embeds=lambda cfg: cfg.playbook_relevance != "jaccard",
)
FACTS = MemorySource(
    name="facts",
    service=FACT_MEMORY,
    title="Long-term Facts:",
    share=0.4,
    fetch=_facts,
    top_k="fact-retrieval-top-k",
    min_score="fact-min-score",
    embeds=lambda cfg: True,
)
EPISODES = MemorySource(
    name="episodes",
    service=EPISODE_MEMORY,
    title="Relevant Past Episodes:",
    share=0.25,
    fetch=_episodes,
    top_k="episode-retrieval-top-k",
    min_score="episode-min-score",
    embeds=lambda cfg: True,
)
CONVERSATIONS = MemorySource(
    name="conversation",
    service=CONVERSATION_MEMORY,
    title="Conversation History:",
    share=0.35,
    fetch=_conversation,
    needs=lambda scope: scope.conversation is not None,
)

#: The built-in sources, in the order of their sections in the prompt (the memory kinds
#: name theirs, so the agent reads what is installed: see ``registered``).
SOURCES: tuple[MemorySource, ...] = (PLAYBOOK, FACTS, EPISODES, CONVERSATIONS)
_added: dict[str, MemorySource] = {}
#: The sources beyond the built-in ones that the memory kinds name, keys declared.
_of_kinds: dict[str, MemorySource] = {}


def register(source: MemorySource) -> None:
    """Add a memory source that no memory kind names, its ``agent-mem`` keys with it."""
    if source.name in {s.name for s in registered()}:
        raise ConfigurationError(f"a memory source named {source.name!r} is registered")
    declare(source.keys)
    _added[source.name] = source


def unregister(name: str) -> None:
    """Remove an added source and its keys (the kinds' stay)."""
    source = _added.pop(name, None)
    if source is not None:
        undeclare(k.name for k in source.keys)


def registered() -> tuple[MemorySource, ...]:
    """Every source, in the order of their sections in the prompt: the built-in ones the
    memory kinds name, the other kinds' sources, then those added by ``register``. The
    kinds' own keys are declared here, and undeclared when their kind is gone (the agent
    reads this when it starts, before any config)."""
    named = [load(k.source) for k in kinds() if k.source is not None]
    for source in named:
        if not isinstance(source, MemorySource):
            raise ConfigurationError(f"{source!r} named by a memory kind is not a MemorySource")
    others = [s for s in named if s not in SOURCES]
    for gone in _of_kinds.keys() - {s.name for s in others}:
        undeclare(k.name for k in _of_kinds.pop(gone).keys)
    for source in others:
        if source.name not in _of_kinds:
            declare(source.keys)
            _of_kinds[source.name] = source
    return (*(s for s in SOURCES if s in named), *others, *_added.values())
