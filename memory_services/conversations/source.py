"""conversation-memory's recall source: the agent's "Conversation History" section, the
request's own conversation loaded by id (named by ``kind.py``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from react_mem.agent.config import Key
from react_mem.agent.items import Item, conversation_items
from react_mem.agent.sources import Ask, MemorySource, setting
from react_mem.clients.conversations import CONVERSATION_MEMORY, ConversationClient


async def _conversation(ask: Ask) -> list[Item]:
    turns = int(setting(ask.cfg, "conversation-turns"))
    conversation = await ConversationClient.of(ask.flow).get(ask.scope, limit=max(turns, 1))
    if conversation is not None:  # what this answer's turn will have to tell
        if conversation.notices_pending:
            ask.holds.add("quota notices")
        if conversation.turns_left is not None and conversation.turns_left <= 1:
            ask.holds.add("the conversation's cap")
    return conversation_items(conversation, turns)


CONVERSATIONS = MemorySource(
    name="conversation",
    service=CONVERSATION_MEMORY,
    title="Conversation History:",
    share=0.35,
    section=30,
    fetch=_conversation,
    needs=lambda scope: scope.conversation is not None,
    keys=(
        # The conversation's most recent turns shown besides its rolling summary.
        Key("conversation-turns", Annotated[int, Field(ge=0, le=100)], 5),
    ),
)
