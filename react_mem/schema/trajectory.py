"""The trajectory record the agent publishes for the memory learner (react-mem's own)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from react_mem.schema.agent import AgentStep, MemoryRef
from react_mem.schema.base import WireModel

Outcome = Literal["success", "failure", "partial"]

#: The action of a step that stands for a reply the agent could not parse.
PARSE_ERROR_ACTION = "__parse_error__"


class Trajectory(WireModel):
    """One finished invocation, published on the flow's persistent ``trajectory`` queue.

    ``trajectory_id`` is the agent session id: a redelivered or re-published record with
    the same id is the same invocation, and the learner writes its effects once.
    """

    trajectory_id: str = ""
    collection: str = "default"
    user: str | None = None
    conversation_id: str = ""
    session_id: str = ""
    question: str = ""
    answer: str = ""
    steps: list[AgentStep] = Field(default_factory=list)
    #: The agent's own verdict: ``success`` (answered), ``partial`` (answered at the
    #: iteration limit or after tool errors), ``failure`` (no answer).
    outcome: Outcome = "success"
    error: str | None = None
    iterations: int = 0
    tool_errors: int = 0
    parse_retries: int = 0
    compressions: int = 0
    in_tokens: int = 0
    out_tokens: int = 0
    duration_seconds: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    #: Memory items (facts, episodes, turns, playbook bullets) that were in the prompt.
    memory_used: list[MemoryRef] = Field(default_factory=list)
    #: The agent-mem settings in force, so the learner honours them.
    extract_facts: bool = True
    record_episode: bool = True
    #: Set by clients that know the right answer (evaluation); used by reflection.
    ground_truth: str | None = None
    #: The playbook context scope the agent used (seed 001's context-scoped memory).
    context_scope_id: str = ""
