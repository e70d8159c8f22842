"""The trajectory record the agent publishes for the memory learner (react-mem's own)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from react_mem.schema.agent import AgentStep, MemoryRef
from react_mem.schema.base import WireModel

Outcome = Literal["success", "failure", "partial"]

#: The action of a step that stands for a reply the agent could not parse.
PARSE_ERROR_ACTION = "__parse_error__"
#: An outcome's success score before penalties (seed 002's ``success_score``, 0..1).
BASE_SCORE: dict[str, float] = {"success": 1.0, "partial": 0.5, "failure": 0.0}


def success_score(outcome: Outcome, tool_errors: int = 0, parse_retries: int = 0) -> float:
    """0..1: the outcome's base, less 0.1 per failed tool call and 0.05 per malformed reply."""
    penalty = 0.1 * tool_errors + 0.05 * parse_retries
    return round(max(0.0, min(1.0, BASE_SCORE[outcome] - penalty)), 3)


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
    #: From the request (seed 002): what kind of task, and the session that spawned it.
    task_type: str = ""
    parent_session_id: str = ""
    #: The agent's success score, 0..1 (:func:`success_score`; seed 002). The cost is
    #: ``in_tokens`` + ``out_tokens`` and ``duration_seconds``.
    score: float = Field(default=0.0, ge=0.0, le=1.0)
    #: The ids of the playbook bullets the agent's replies said they relied on (seed 003:
    #: the generator cites bullet ids), among those shown (``memory_used`` of kind
    #: ``bullet``). Only these are credited or blamed; the others shown only age. ``None``
    #: (a record from an agent that does not cite): every bullet shown counts as used.
    bullets_used: list[str] | None = None

    def bullets_shown(self) -> list[str]:
        """The ids of the playbook bullets that were in the prompt, each once."""
        return list(dict.fromkeys(r.id for r in self.memory_used if r.kind == "bullet" and r.id))
