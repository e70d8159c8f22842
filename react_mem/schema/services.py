"""Messages of the TrustGraph services the agent's tools call.

Field lists from TrustGraph 2.11: ``schema/services/prompt.py`` (prompt),
``schema/services/retrieval.py`` (graph RAG), ``schema/services/llm.py`` (MCP tools),
``schema/services/structured.py`` (structured query), ``schema/embeddings.py``
(embeddings, row embeddings), ``schema/agent.py`` (tool services) and
``schema/triples.py`` (the explainability flow's triples).
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


class StructuredQueryRequest(WireModel):
    question: str = ""
    collection: str = ""


class StructuredQueryResponse(WireModel):
    error: Error | None = None
    #: JSON-encoded GraphQL response data.
    data: str = ""
    errors: list[str] = Field(default_factory=list)


class EmbeddingsRequest(WireModel):
    texts: list[str] = Field(default_factory=list)


class EmbeddingsResponse(WireModel):
    error: Error | None = None
    vectors: list[list[float]] = Field(default_factory=list)


class RowIndexMatch(WireModel):
    index_name: str = ""
    index_value: list[str] = Field(default_factory=list)
    text: str = ""
    score: float = 0.0
    attributes: dict[str, str | list[str]] = Field(default_factory=dict)


class RowEmbeddingsRequest(WireModel):
    vector: list[float] = Field(default_factory=list)
    limit: int = 10
    collection: str = ""
    schema_name: str = ""
    index_name: str | None = None
    attributes: dict[str, str | list[str]] = Field(default_factory=dict)


class RowEmbeddingsResponse(WireModel):
    error: Error | None = None
    matches: list[RowIndexMatch] = Field(default_factory=list)


class ToolServiceRequest(WireModel):
    """A call to a configured tool service: ``config`` and ``arguments`` JSON-encoded."""

    config: str = ""
    arguments: str = ""


class ToolServiceResponse(WireModel):
    error: Error | None = None
    response: str = ""
    end_of_stream: bool = False


class Metadata(WireModel):
    id: str = ""
    root: str = ""
    collection: str = ""


class Triples(WireModel):
    """Triples for the graph store: the agent's provenance on its ``explainability`` flow."""

    metadata: Metadata | None = None
    triples: list[Triple] = Field(default_factory=list)


class DocumentMetadata(WireModel):
    id: str = ""
    time: int = 0
    kind: str = ""
    title: str = ""
    comments: str = ""
    metadata: list[Triple] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    parent_id: str = ""
    document_type: str = "source"


class LibrarianRequest(WireModel):
    """The part of TrustGraph's librarian request the agent sends (``add-document``):
    ``content`` is the document, base64-encoded."""

    operation: str = ""
    document_id: str = ""
    document_metadata: DocumentMetadata | None = None
    content: str = ""
    collection: str = ""


class LibrarianResponse(WireModel):
    """The part of TrustGraph's librarian response the agent reads."""

    error: Error | None = None
    document_id: str = ""
