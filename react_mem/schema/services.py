"""Messages of the TrustGraph services the agent's tools call.

Field lists from TrustGraph 2.11: ``schema/services/prompt.py`` (prompt),
``schema/services/retrieval.py`` (graph RAG) and ``schema/services/llm.py`` (MCP tools).
"""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel
from react_mem.schema.primitives import Error, Triple


class PromptRequest(WireModel):
    #: The template id, e.g. ``question``.
    id: str = ""
    #: Template variables, each JSON-encoded.
    terms: dict[str, str] = Field(default_factory=dict)
    streaming: bool = False


class PromptResponse(WireModel):
    error: Error | None = None
    text: str = ""
    #: JSON-encoded, for templates that answer with an object.
    object: str = ""
    end_of_stream: bool = False
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None


class GraphRagQuery(WireModel):
    query: str = ""
    collection: str = ""
    entity_limit: int = 0
    triple_limit: int = 0
    max_subgraph_size: int = 0
    max_path_length: int = 0
    edge_score_limit: int = 0
    edge_limit: int = 0
    max_reranker_input: int = 0
    streaming: bool = False
    parent_uri: str = ""


class Source(WireModel):
    uri: str = ""
    title: str = ""


class GraphRagResponse(WireModel):
    error: Error | None = None
    response: str = ""
    end_of_stream: bool = False
    explain_id: str | None = None
    explain_graph: str | None = None
    explain_triples: list[Triple] = Field(default_factory=list)
    #: ``chunk`` or ``explain``.
    message_type: str = ""
    end_of_session: bool = False
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
    sources: list[Source] = Field(default_factory=list)


class ToolRequest(WireModel):
    """An MCP tool call: ``parameters`` is a JSON-encoded object."""

    name: str = ""
    parameters: str = ""


class ToolResponse(WireModel):
    error: Error | None = None
    text: str = ""
    #: JSON-encoded, for tools that answer with structured output.
    object: str = ""
