"""The working-memory client: ``compress``."""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.clients.base import Service, ServiceClient, build, owner
from react_mem.schema.agent import AgentStep
from react_mem.schema.scope import Scope
from react_mem.schema.working import WorkingMemoryRequest, WorkingMemoryResponse

WORKING_MEMORY: Service[WorkingMemoryRequest, WorkingMemoryResponse] = Service(
    "working-memory", WorkingMemoryRequest, WorkingMemoryResponse
)


class WorkingMemoryClient(ServiceClient[WorkingMemoryRequest, WorkingMemoryResponse]):
    service = WORKING_MEMORY

    async def compress(
        self,
        scope: Scope,
        steps: Sequence[AgentStep],
        *,
        threshold: int | None = None,
        keep_recent: int | None = None,
        timeout: float | None = None,
    ) -> WorkingMemoryResponse:
        """``steps`` with the older ones summarised when they exceed ``threshold`` tokens."""
        request = build(
            WorkingMemoryRequest,
            operation="compress",
            steps=list(steps),
            threshold=threshold,
            keep_recent=keep_recent,
            **owner(scope),
        )
        return await self.call(request, timeout=timeout)
