"""The memory sources the agent recalls from at invocation start: the seam a memory kind
plugs into.

A source names its service (the flow's ``<service>-request`` client), its prompt section
(title, place, share of ``memory-token-budget``) and the ``agent-mem`` keys that size it,
and says how it is asked. Each memory kind's source lives in its own package
(``memory_services/<kind>/source.py``, the one module there that may import this seam) and
its ``kind.py`` names it; the five built-in kinds are declared that way, as a new one is.
The agent reads them once, as :class:`Sources`, from the :class:`MemoryKinds` it is given:
its client specs, its recall fan-out, the memory section's layout and the ``agent-mem``
keys its config accepts all come from there (a source declares the keys only it reads:
``keys``, name, type with bounds, default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from react_mem.agent.config import AgentMemConfig, Key, check_keys
from react_mem.agent.items import Item
from react_mem.clients.base import Service
from react_mem.errors import ConfigurationError
from react_mem.processor.flow import Flow
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema import AgentStep
from react_mem.schema.scope import Scope


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
    #: Filled by a source whose record says the answer must wait for its turn's append to
    #: be stored, and why (the conversation has quota notices to tell, or is at its cap:
    #: what the append's reply says goes into the answer). One set per recall.
    holds: set[str] = dataclasses.field(default_factory=set, compare=False)

    @property
    def owner(self) -> Scope:
        """The request's owner across its conversations: recall spans all of them."""
        return dataclasses.replace(self.scope, conversation=None)


#: Steps of the request's history that describe its state, and their length at most.
STATE_STEPS, STATE_CHARS = 3, 1000


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
    #: Place of its section in the memory part of the prompt (lower first).
    section: int
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
    #: them, or its own settings, read with ``setting``); the config takes them with it.
    keys: tuple[Key, ...] = ()

    @property
    def client(self) -> str:
        return self.service.request

    def ask(
        self,
        flow: Flow,
        cfg: AgentMemConfig,
        question: str,
        scope: Scope,
        state: str = "",
        task_type: str = "",
        holds: set[str] | None = None,
    ) -> Ask | None:
        """The question for this source, or ``None`` when it is not asked (``state``,
        ``task_type`` and ``holds``: see :class:`Ask`)."""
        top_k = int(setting(cfg, self.top_k)) if self.top_k else 0
        if (self.top_k and top_k <= 0) or not self.needs(scope):
            return None
        if not flow.has_client(self.client):
            return None
        min_score = float(setting(cfg, self.min_score)) if self.min_score else None
        return Ask(
            flow,
            cfg,
            question,
            None,
            scope,
            top_k,
            min_score,
            state,
            task_type,
            set() if holds is None else holds,
        )


#: ``agent-mem`` keys (hyphenated) of the config's own fields, and the fields' names.
_FIELDS = {info.alias: name for name, info in AgentMemConfig.model_fields.items() if info.alias}


def setting(cfg: AgentMemConfig, key: str) -> Any:
    """The value of ``agent-mem`` key ``key`` (hyphenated, as the config map spells it):
    one of the config's own fields or a key a memory source declared."""
    name = _FIELDS.get(key)
    return getattr(cfg, name) if name is not None else cfg.declared(key)


@dataclass(frozen=True, init=False)
class Sources:
    """The agent's memory sources, in the order of their sections in the prompt, and the
    ``agent-mem`` keys they declare: read once from the memory kinds the agent is given."""

    sources: tuple[MemorySource, ...]

    def __init__(self, sources: Sequence[MemorySource] = ()) -> None:
        names = [s.name for s in sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigurationError(f"memory sources named twice: {', '.join(twice)}")
        check_keys(k for s in sources for k in s.keys)
        ordered = tuple(sorted(sources, key=lambda s: (s.section, s.name)))
        object.__setattr__(self, "sources", ordered)

    @classmethod
    def of(cls, kinds: MemoryKinds) -> Sources:
        """The sources the memory kinds name."""
        named = []
        for kind in kinds:
            if isinstance(kind.source, MemorySource):
                named.append(kind.source)
            elif kind.source is not None:
                raise ConfigurationError(f"the source of {kind.name} is not a MemorySource")
        return cls(named)

    @property
    def keys(self) -> tuple[Key, ...]:
        """The ``agent-mem`` keys the sources declare."""
        return tuple(k for s in self.sources for k in s.keys)

    def __iter__(self) -> Iterator[MemorySource]:
        return iter(self.sources)
