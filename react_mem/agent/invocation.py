"""One iteration of an agent invocation as one value: the request, the flow it came in on,
the workspace's settings, the owner scope, whether memory is on and the carried state."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from react_mem.agent.config import AgentMemConfig
from react_mem.processor.flow import Flow
from react_mem.schema.agent import AgentRequest, MemoryState
from react_mem.schema.scope import Scope


@dataclass
class Invocation:
    request: AgentRequest
    flow: Flow
    cfg: AgentMemConfig
    #: The request's owner: its user sees only its own memories, no user only the
    #: collection's shared ones (see react_mem.schema.scope).
    scope: Scope
    #: The request's ``enable_memory``, else the workspace's.
    memory_on: bool
    #: What travels to the next iteration in ``AgentRequest.memory`` (sealed).
    state: MemoryState = field(default_factory=MemoryState)

    @classmethod
    def of(cls, request: AgentRequest, flow: Flow, cfg: AgentMemConfig) -> Invocation:
        """The iteration of ``request``; a request without a session id is given one."""
        request = request.model_copy(update={"session_id": request.session_id or str(uuid.uuid4())})
        scope = Scope(
            flow.workspace, request.collection or "default", request.user, request.conversation_id
        )
        if request.context_scope_id is not None:  # the request's context over the workspace's
            cfg = cfg.model_copy(update={"playbook_context_scope": request.context_scope_id})
        return cls(request, flow, cfg, scope, cfg.memory_for(request.enable_memory))
