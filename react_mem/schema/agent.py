"""Agent service messages (TrustGraph ``schema/services/agent.py``).

react-mem adds optional fields at the end of :class:`AgentRequest`; absent or ``null``
means "use the processor's configured default", so TrustGraph clients need not know them.
"""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel
from react_mem.schema.primitives import Error, Triple


class PlanStep(WireModel):
    goal: str = ""
    tool_hint: str = ""
    depends_on: list[int] = Field(default_factory=list)
    status: str = "pending"
    result: str = ""


class AgentStep(WireModel):
    thought: str = ""
    action: str = ""
    arguments: dict[str, str] = Field(default_factory=dict)
    observation: str = ""
    step_type: str = ""
    plan: list[PlanStep] = Field(default_factory=list)
    subagent_results: dict[str, str] = Field(default_factory=dict)


class AgentRequest(WireModel):
    question: str = ""
    state: str = ""
    group: list[str] | None = None
    history: list[AgentStep] = Field(default_factory=list)
    collection: str = "default"
    streaming: bool = False
    session_id: str = ""
    conversation_id: str = ""
    pattern: str = ""
    task_type: str = ""
    framing: str = ""
    correlation_id: str = ""
    parent_session_id: str = ""
    subagent_goal: str = ""
    expected_siblings: int = 0
    # react-mem extensions (optional; TrustGraph peers ignore them).
    enable_memory: bool | None = None
    user: str | None = None


class AgentResponse(WireModel):
    message_type: str = ""
    content: str = ""
    end_of_message: bool = False
    end_of_dialog: bool = False
    explain_id: str | None = None
    explain_graph: str | None = None
    explain_triples: list[Triple] = Field(default_factory=list)
    message_id: str = ""
    error: Error | None = None
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
