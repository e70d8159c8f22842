"""working-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``).

The agent calls it to compress its steps; it holds nothing past an invocation, so it has
neither a recall source nor a forget client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from react_mem.processor.kinds import SMALL, Deploy, MemoryKind

if TYPE_CHECKING:
    from react_mem.processor.base import Processor


def processor() -> type[Processor]:
    """The service's class, imported only by whoever starts it."""
    from memory_services.working.service import WorkingMemoryProcessor

    return WorkingMemoryProcessor


KIND = MemoryKind(
    name="working-memory",
    processor=processor,
    position=50,
    deploy=Deploy(concurrency=2, qdrant=False, resources=SMALL),
    agent_client=True,
    audit=False,
    calls=("text-completion",),
    interface=False,
)
