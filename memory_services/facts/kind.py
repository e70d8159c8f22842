"""fact-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_services.facts.source import FACTS
from react_mem.clients.facts import FactClient
from react_mem.processor.kinds import MemoryKind

if TYPE_CHECKING:
    from react_mem.processor.base import Processor


def processor() -> type[Processor]:
    """The service's class, imported only by whoever starts it (its module loads the store)."""
    from memory_services.facts.service import FactMemoryProcessor

    return FactMemoryProcessor


KIND = MemoryKind(
    name="fact-memory",
    processor=processor,
    position=10,
    source=FACTS,
    client=FactClient,
)
