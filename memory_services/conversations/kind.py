"""conversation-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_services.conversations.source import CONVERSATIONS
from react_mem.clients.conversations import ConversationClient
from react_mem.processor.kinds import MemoryKind

if TYPE_CHECKING:
    from react_mem.processor.base import Processor


def processor() -> type[Processor]:
    """The service's class, imported only by whoever starts it (its module loads the store)."""
    from memory_services.conversations.service import ConversationMemoryProcessor

    return ConversationMemoryProcessor


KIND = MemoryKind(
    name="conversation-memory",
    processor=processor,
    position=30,
    source=CONVERSATIONS,
    client=ConversationClient,
    flows=(("ended", "conversation-ended"),),
)
