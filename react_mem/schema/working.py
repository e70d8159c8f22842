"""Working-memory messages: compress an invocation's steps to a token threshold."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from react_mem.schema import AgentStep, Error
from react_mem.schema.base import MAX_REQUEST_VALUES, WireModel

#: The operations this service answers.
WorkingMemoryOperation = Literal["compress"]
OPERATIONS: tuple[WorkingMemoryOperation, ...] = get_args(WorkingMemoryOperation)
#: ``step_type`` of the step that stands for the summarised older steps.
SUMMARY_STEP_TYPE = "summary"
#: Most steps one request may carry on the wire (refused when decoded); the service's own
#: ``max_steps`` (1,000 by default) is at most this.
MAX_WORKING_STEPS = 2000


class WorkingMemoryRequest(WireModel):
    """``threshold`` and ``keep_recent`` default to the service's settings when absent."""

    max_values = MAX_REQUEST_VALUES

    #: Required: a missing or unknown one is refused (``bad-operation``) when decoded.
    operation: WorkingMemoryOperation
    collection: str = "default"
    user: str | None = None
    conversation_id: str | None = None
    steps: list[AgentStep] = Field(default_factory=list, max_length=MAX_WORKING_STEPS)
    #: Most tokens the returned steps may hold (counted by the service's tokenizer).
    threshold: int | None = Field(default=None, gt=0)
    #: How many of the most recent steps are kept verbatim.
    keep_recent: int | None = Field(default=None, ge=0)


class WorkingMemoryResponse(WireModel):
    error: Error | None = None
    #: A ``step_type="summary"`` step (when anything was summarised), then the kept steps.
    steps: list[AgentStep] = Field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    #: How many steps the summary stands for.
    summarised: int = 0
    #: True when the summary is the deterministic one (the LLM failed or is unusable).
    fallback: bool = False
    #: How many of the input's most recent steps were kept verbatim.
    kept: int = 0
