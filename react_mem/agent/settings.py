"""The agent processor's settings, and the clients it asks for in every flow:
TrustGraph's agent-manager clients, then one per memory source it is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr

from react_mem.agent.config import CONFIG_TYPE
from react_mem.agent.data_tools import CLIENTS
from react_mem.agent.respond import DOCUMENT_CLIENTS
from react_mem.agent.sources import Sources
from react_mem.clients.working import WORKING_MEMORY
from react_mem.embedding.base import DEFAULT_BACKEND, EmbeddingBackend
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import RequestResponseSpec
from react_mem.schema import TextCompletionRequest, TextCompletionResponse
from react_mem.schema.services import (
    GraphRagQuery,
    GraphRagResponse,
    PromptRequest,
    PromptResponse,
    ToolRequest,
    ToolResponse,
)


class AgentSettings(ProcessorSettings):
    #: Defaults for keys the workspace's ``agent-mem`` config does not set.
    max_iterations: int = Field(default=10, ge=1, le=100)
    #: The config type read for memory settings (TrustGraph's ``--config-type``).
    config_type: str = CONFIG_TYPE
    #: The query embedder; must be the memory services' model (vectors are compared).
    embedding_model: str = Field(default="all-MiniLM-L6-v2", min_length=1)
    embedding_backend: EmbeddingBackend = DEFAULT_BACKEND
    torch_threads: int = Field(default=1, ge=1, le=64)
    #: Token counting for the memory budget and working memory (default: MiniLM's tokenizer).
    tokenizer: Path | None = None
    #: Seconds to wait for memory writes after the answer (conversation append).
    memory_write_timeout: float = Field(default=5.0, gt=0)
    #: What a final answer waits for of its conversation turn's append (``agent/turns.py``):
    #: ``sent``, its request on the bus (conversation memory serves a conversation's
    #: operations in their order of arrival, so a follow-up's read comes after it), or
    #: ``reply``, the turn stored: set it where replicas of conversation-memory share a
    #: subscription (the chart does when it runs more than one).
    turn_wait: Literal["sent", "reply"] = "sent"
    #: Seconds one iteration may wait for the LLM, every retry included, before the caller
    #: is answered with an ``llm-error`` (a workspace's ``llm-timeout`` overrides it).
    llm_deadline: float = Field(default=60.0, gt=0, le=3600)
    #: The key sealing ``AgentRequest.memory`` (env REACT_MEM_MEMORY_STATE_KEY): every
    #: replica of the agent must have the same one. Unset: generated once and kept in
    #: ``memory_state_key_file`` (default ``state_dir/agent/memory-state.key``).
    memory_state_key: SecretStr | None = None
    memory_state_key_file: Path | None = None
    #: Seconds a sealed state stays good after its invocation began; each is good once
    #: (see ``agent/seal.py``).
    memory_state_max_age: float = Field(default=3600.0, gt=0)


def client_specs(sources: Sources) -> list[RequestResponseSpec]:
    """TrustGraph's agent-manager clients, then react-mem's memory services."""
    pairs: list[tuple[str, type[Any], type[Any], bool]] = [
        ("text-completion", TextCompletionRequest, TextCompletionResponse, False),
        ("graph-rag", GraphRagQuery, GraphRagResponse, True),
        ("prompt", PromptRequest, PromptResponse, True),
        ("mcp-tool", ToolRequest, ToolResponse, True),
    ]
    pairs += [(name, req, resp, True) for name, req, resp in (*CLIENTS, *DOCUMENT_CLIENTS)]
    pairs += [
        (s.service.name, s.service.request_schema, s.service.response_schema, True) for s in sources
    ]
    working = WORKING_MEMORY
    pairs.append((working.name, working.request_schema, working.response_schema, True))
    return [
        RequestResponseSpec(
            request=f"{name}-request",
            response=f"{name}-response",
            request_schema=req,
            response_schema=resp,
            timeout=300.0,
            optional=optional,
        )
        for name, req, resp, optional in pairs
    ]
