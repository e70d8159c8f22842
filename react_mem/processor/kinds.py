"""Memory kinds, each declared once in its own package, and the one registry of them.

A memory service's package declares a :class:`MemoryKind` (``KIND`` in its ``kind.py``) and
registers it with one line in ``pyproject.toml``'s ``react_mem.memory_kinds`` entry-point
group. Everything else follows from the declaration: the runtime starts its processor, the
topology command wires its queues into every generated deployment file (the agent's
optional client among them), the agent recalls from its ``source`` (a ``MemorySource`` of
its package's ``source.py``, which brings the ``agent-mem`` keys it reads), and ``memory
forget`` reaches its ``client``.

:class:`MemoryKinds` is read once at start-up (:meth:`MemoryKinds.from_entry_points`) and
passed to whoever needs it: the runtime, the agent, ``memory forget``, the topology. It is
immutable; a test or an embedding application builds its own from explicit kinds. The kind
holds its objects, not names of them: its processor is a function importing its service
class (only whoever starts it loads the store), its source and client are imported by
``kind.py``, so every edge is an import the layer test sees (nothing in react_mem imports a
memory service).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from react_mem.errors import ConfigurationError

if TYPE_CHECKING:
    from react_mem.processor.base import Processor

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
    #: Its processor class, imported when called (the service's module loads its store).
    processor: Callable[[], type[Processor]]
    #: Place among the kinds in generated files (lower first).
    position: int
    deploy: Deploy = Deploy()
    #: The agent's ``MemorySource`` recalling from it (``react_mem.agent.sources``), if
    #: any: held as an object the agent checks, since the framework knows no agent type.
    source: object | None = None
    #: The agent calls it (an optional client of the agent's; implied by ``source``).
    agent_client: bool = False
    #: Its typed client class: when set, the kind holds a user's data and ``memory forget``
    #: sends it ``forget`` through this client's ``forget(scope)``.
    client: type[Any] | None = None
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


@dataclass(frozen=True, init=False)
class MemoryKinds:
    """Every memory kind of this process, by position; built once and passed on."""

    kinds: tuple[MemoryKind, ...]

    def __init__(self, kinds: tuple[MemoryKind, ...] | list[MemoryKind] = ()) -> None:
        names = [k.name for k in kinds]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigurationError(f"memory kinds registered twice: {', '.join(twice)}")
        object.__setattr__(self, "kinds", tuple(sorted(kinds, key=lambda k: (k.position, k.name))))

    @classmethod
    def from_entry_points(cls) -> MemoryKinds:
        """The kinds the installed packages register (read at start-up, then passed on)."""
        found = []
        for point in entry_points(group=ENTRY_POINTS):
            kind = point.load()
            if not isinstance(kind, MemoryKind) or kind.name != point.name:
                raise ConfigurationError(
                    f"entry point {point.name!r} of {ENTRY_POINTS} must name a MemoryKind of "
                    "that name"
                )
            found.append(kind)
        return cls(found)

    def plus(self, *kinds: MemoryKind) -> MemoryKinds:
        """These kinds and ``kinds`` (a test's, or an embedding application's own)."""
        return MemoryKinds((*self.kinds, *kinds))

    def __iter__(self) -> Iterator[MemoryKind]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def named(self, name: str) -> MemoryKind | None:
        return next((k for k in self.kinds if k.name == name), None)
