"""Typed clients of the flow's services: one method per operation, one exception per
error reply (:mod:`react_mem.clients.errors`). Nothing outside a client builds a request."""

from react_mem.clients.config import ConfigClient
from react_mem.clients.conversations import ConversationClient
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.facts import FactClient
from react_mem.clients.forget import LearnerForgetClient
from react_mem.clients.llm import Deadline, RetryPolicy, TextCompletionClient
from react_mem.clients.playbook import PlaybookClient
from react_mem.clients.working import WorkingMemoryClient

__all__ = [
    "ConfigClient",
    "ConversationClient",
    "Deadline",
    "EpisodeClient",
    "FactClient",
    "LearnerForgetClient",
    "PlaybookClient",
    "RetryPolicy",
    "TextCompletionClient",
    "WorkingMemoryClient",
]
