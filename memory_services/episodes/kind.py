"""episode-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_services.episodes.source import EPISODES
from react_mem.clients.episodes import EpisodeClient
from react_mem.processor.kinds import MemoryKind

if TYPE_CHECKING:
    from react_mem.processor.base import Processor


def processor() -> type[Processor]:
    """The service's class, imported only by whoever starts it (its module loads the store)."""
    from memory_services.episodes.service import EpisodeMemoryProcessor

    return EpisodeMemoryProcessor


KIND = MemoryKind(
    name="episode-memory",
    processor=processor,
    position=20,
    source=EPISODES,
    client=EpisodeClient,
)
