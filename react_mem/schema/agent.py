"""Agent service messages (TrustGraph ``schema/services/agent.py``).

react-mem adds optional fields at the end of :class:`AgentRequest`; absent or ``null``
means "use the processor's configured default", so TrustGraph clients need not know them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from react_mem.schema.base import MAX_REQUEST_VALUES, WireModel
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


#: The built-in memory sources' kinds (``MemoryRef.kind``); a registered source names its own.
MemoryKind = Literal["fact", "episode", "turn", "summary", "bullet"]


class MemoryRef(WireModel):
    """One memory item that was placed in the prompt."""

    kind: str = "fact"
    id: str = ""
    content: str = ""
    score: float | None = None
    #: Tokens the item took in the prompt (its text as placed, cut short if it was).
    tokens: int | None = None


class MemoryState(WireModel):
    """Carried in ``AgentRequest.memory`` from one iteration to the next, so any replica
    continues an invocation without assembling its memory context again. Only the agent
    produces it: ``seal`` binds it to its invocation, and a state that does not verify is
    refused (``react_mem.agent.seal``)."""

    #: The rendered memory section of the prompt (already within its token budget).
    context: str = ""
    #: Playbook bullets placed right before the question (``playbook-injection:
    #: post_context``), fenced like ``context`` and within the same budget.
    post_context: str = ""
    #: What the context holds, for the trajectory record.
    used: list[MemoryRef] = Field(default_factory=list)
    #: Iterations done so far (``history`` shrinks when working memory is compressed).
    iteration: int = 0
    #: Epoch seconds the invocation started.
    started_at: float = 0.0
    #: LLM tokens used so far by this invocation.
    in_tokens: int = 0
    out_tokens: int = 0
    #: Corrective retries spent on malformed LLM replies so far.
    parse_retries: int = 0
    #: Working-memory compressions so far.
    compressions: int = 0
    #: Every step taken, compressed or not, for the trajectory record.
    steps: list[AgentStep] = Field(default_factory=list)
    #: The shown playbook bullets the LLM's replies said they relied on, first cited first.
    cited: list[str] = Field(default_factory=list)
    #: Whether the answer must wait for its turn to be stored, whatever ``turn_wait`` says:
    #: recall found quota notices to tell, or the conversation at its cap.
    hold_turn: bool = False
    #: ``v1:`` and the HMAC-SHA256 of the fields above and the invocation, by the agent.
    seal: str = ""


class AgentRequest(WireModel):
    #: A history of thousands of empty steps fits the bus's 5 MiB and took a minute to
    #: validate; a real one (tens of iterations) holds a few thousand values.
    max_values = MAX_REQUEST_VALUES

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
    #: The playbook context this request learns in and recalls from (seed 001's context
    #: scopes); absent: the workspace's ``playbook-context-scope``.
    context_scope_id: str | None = Field(default=None, max_length=256)
    #: Set by the agent on its ``next`` requests, sealed (see :class:`MemoryState`);
    #: clients leave it unset.
    memory: MemoryState | None = None


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
