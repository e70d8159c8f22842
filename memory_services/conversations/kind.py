"""conversation-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from react_mem.processor.kinds import MemoryKind

KIND = MemoryKind(
    name="conversation-memory",
    processor="memory_services.conversations.service:ConversationMemoryProcessor",
    position=30,
    source="react_mem.agent.sources:CONVERSATIONS",
    client="react_mem.clients.conversations:ConversationClient",
    flows=(("ended", "conversation-ended"),),
)
