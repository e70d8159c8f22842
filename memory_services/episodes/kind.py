"""episode-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from react_mem.processor.kinds import MemoryKind

KIND = MemoryKind(
    name="episode-memory",
    processor="memory_services.episodes.service:EpisodeMemoryProcessor",
    position=20,
    source="react_mem.agent.sources:EPISODES",
    client="react_mem.clients.episodes:EpisodeClient",
)
