"""Wire models, JSON-compatible with TrustGraph 2.11's serialiser."""

from react_mem.schema.agent import AgentRequest, AgentResponse, AgentStep, PlanStep
from react_mem.schema.base import MAX_MESSAGE_BYTES, WireModel
from react_mem.schema.config import (
    CONFIG_PUSH_QUEUE,
    CONFIG_REQUEST_QUEUE,
    CONFIG_RESPONSE_QUEUE,
    ConfigKey,
    ConfigPush,
    ConfigRequest,
    ConfigResponse,
    ConfigValue,
    WorkspaceChanges,
)
from react_mem.schema.llm import TextCompletionRequest, TextCompletionResponse
from react_mem.schema.primitives import Error, Term, Triple

__all__ = [
    "CONFIG_PUSH_QUEUE",
    "CONFIG_REQUEST_QUEUE",
    "CONFIG_RESPONSE_QUEUE",
    "MAX_MESSAGE_BYTES",
    "AgentRequest",
    "AgentResponse",
    "AgentStep",
    "ConfigKey",
    "ConfigPush",
    "ConfigRequest",
    "ConfigResponse",
    "ConfigValue",
    "Error",
    "PlanStep",
    "Term",
    "TextCompletionRequest",
    "TextCompletionResponse",
    "Triple",
    "WireModel",
    "WorkspaceChanges",
]
