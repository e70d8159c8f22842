"""Memory kinds, each declared once: the one registration a memory service needs.

A memory service's package declares a :class:`MemoryKind` (``KIND`` in its ``kind.py``) and
registers it with one line in ``pyproject.toml``'s ``react_mem.memory_kinds`` entry-point
group. Everything else follows from the declaration: the runtime starts its processor, the
topology command wires its queues into every generated deployment file (the agent's
optional client among them), the agent recalls from its ``source``, and ``memory forget``
reaches its ``client``. Processor, source and client are named ``"module:attribute"`` and
loaded only by whoever needs them, so declaring a kind imports nothing heavy and the layers
stay one way (nothing in react_mem imports a memory service).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from react_mem.errors import ConfigurationError

#: The entry-point group memory kinds are registered under.
ENTRY_POINTS = "react_mem.memory_kinds"


@dataclass(frozen=True)
class Resources:
    """A replica's Kubernetes resources in the chart's values."""

    cpu: str = "250m"
    memory: str = "768Mi"
    memory_limit: str = "1536Mi"


#: What a service that only keeps state around the LLM needs.
SMALL = Resources(cpu="100m", memory="256Mi", memory_limit="512Mi")


@dataclass(frozen=True)
class Deploy:
    """How a memory service is deployed (group-file entry, compose service, chart values)."""

    #: Its ``concurrency`` in the group file (compose takes ``MEMORY_CONCURRENCY``).
    concurrency: int = 4
    #: Keeps its vectors in the Qdrant server in compose and the chart (so it can scale).
    qdrant: bool = True
    #: Further group-file params, as written there (``key: value, ...``).
    params: str = ""
    #: Comment lines above its group-file entry.
    note: tuple[str, ...] = ()
    resources: Resources = Resources()


@dataclass(frozen=True)
class MemoryKind:
    #: The processor's id and its service's name (queues ``request:tg:<name>:...``).
    name: str
    #: The processor class, ``"module:Class"``.
    processor: str
    #: Place among the kinds in generated files (lower first).
    position: int
    deploy: Deploy = Deploy()
    #: The agent's ``MemorySource`` recalling from it, ``"module:attribute"``, if any.
    source: str | None = None
    #: The agent calls it (an optional client of the agent's; implied by ``source``).
    agent_client: bool = False
    #: Its typed client, ``"module:Class"``: when set, the kind holds a user's data and
    #: ``memory forget`` sends it ``forget`` through this client's ``forget(scope)``.
    client: str | None = None
    #: Flow queues besides the shared ``memory-audit`` one: ``(spec, topic)`` pairs.
    flows: tuple[tuple[str, str], ...] = ()
    #: It publishes to the ``memory-audit`` flow.
    audit: bool = True
    #: Services it calls (request/response clients), e.g. ``text-completion``.
    calls: tuple[str, ...] = ()
    #: A TrustGraph client may call it directly (an interface of the blueprint).
    interface: bool = True

    @property
    def called_by_agent(self) -> bool:
        return self.agent_client or self.source is not None


def load(reference: str) -> Any:
    """The object ``"module:attribute"`` names."""
    module, _, attribute = reference.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {reference!r}: {exc}") from exc


_added: dict[str, MemoryKind] = {}


def register(kind: MemoryKind) -> None:
    """Add a kind without packaging it (tests, an embedding application)."""
    if kind.name in {k.name for k in kinds()}:
        raise ConfigurationError(f"a memory kind named {kind.name!r} is registered")
    _added[kind.name] = kind


def unregister(name: str) -> None:
    _added.pop(name, None)


@functools.cache
def installed() -> tuple[MemoryKind, ...]:
    """The kinds the installed packages register, by position."""
    found = []
    for point in entry_points(group=ENTRY_POINTS):
        kind = point.load()
        if not isinstance(kind, MemoryKind) or kind.name != point.name:
            raise ConfigurationError(
                f"entry point {point.name!r} of {ENTRY_POINTS} must name a MemoryKind of that name"
            )
        found.append(kind)
    return tuple(sorted(found, key=lambda k: (k.position, k.name)))


def kinds() -> tuple[MemoryKind, ...]:
    """Every memory kind: the installed ones, then those added by :func:`register`."""
    return (*installed(), *_added.values())
