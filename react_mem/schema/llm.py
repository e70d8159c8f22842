"""Text-completion messages (TrustGraph ``schema/services/llm.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from react_mem.schema.base import WireModel
from react_mem.schema.primitives import Error


class TextCompletionRequest(WireModel):
    system: str = ""
    prompt: str = ""
    streaming: bool = False
    # Constrained output: "json" (optionally with a JSON Schema) where the backend supports it.
    response_format: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    # react-mem's addition: seconds the caller waits for the whole completion, retries
    # included. The service answers within it, with an error if need be. None: no limit.
    timeout: float | None = Field(default=None, gt=0, le=86_400)
    # react-mem's addition: "background" requests (the learner's) wait for a generation slot
    # behind every other request. None: normal, as from a TrustGraph peer.
    priority: Literal["normal", "background"] | None = None

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class TextCompletionResponse(WireModel):
    error: Error | None = None
    response: str = ""
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
    end_of_stream: bool = False
