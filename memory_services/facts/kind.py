"""fact-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from react_mem.processor.kinds import MemoryKind

KIND = MemoryKind(
    name="fact-memory",
    processor="memory_services.facts.service:FactMemoryProcessor",
    position=10,
    source="react_mem.agent.sources:FACTS",
    client="react_mem.clients.facts:FactClient",
)
