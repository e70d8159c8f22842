"""What the inspector reads and writes through: the services' typed clients over the bus.

It is a client like the CLI: every call names its owner's scope, so the services' ownership
rules decide what it sees (alice's pages ask as alice and get only alice's records). The
request/response clients are made once per service, workspace and flow, and reused.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Producer, Transport
from react_mem.clients.base import ServiceClient
from react_mem.clients.conversations import ConversationClient
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.facts import FactClient
from react_mem.clients.playbook import PlaybookClient
from react_mem.commands.common import ServiceQueues, queue
from react_mem.commands.forget import Report, forget_user, targets
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema.audit import MEMORY_AUDIT, AuditEvent

C = TypeVar("C", bound=ServiceClient[Any, Any])

#: The inspector's name on the bus (its subscriptions) and in the audit events it sends.
NAME = "react-mem-inspector"

#: (service, workspace, flow) -> the service's queues.
Queues = Callable[[str, str, str], ServiceQueues]
#: (workspace, flow) -> every forget destination (see :func:`react_mem.commands.forget.targets`).
ForgetTargets = Callable[[str, str], Mapping[str, ServiceQueues]]
#: (workspace, flow) -> the flow's audit queue.
AuditQueue = Callable[[str, str], str]


def audit_queue(workspace: str, flow: str) -> str:
    return queue("flow", MEMORY_AUDIT, workspace, flow)


@dataclass(frozen=True, slots=True)
class Where:
    """Which flow's services answer: the workspace (the tenancy) and the flow."""

    workspace: str = "default"
    flow: str = "default"


class Memory:
    """The typed clients of one running stack, reached over ``transport``."""

    def __init__(
        self,
        transport: Transport,
        *,
        queues: Queues = ServiceQueues.of,
        forget_targets: ForgetTargets | None = None,
        audit: AuditQueue = audit_queue,
        timeout: float = 30.0,
        forget_timeout: float = 120.0,
        kinds: MemoryKinds | None = None,
    ) -> None:
        """``kinds``: the memory kinds whose services forget (default: the installed ones,
        read here); ``forget_targets``: their queues (default: the flow's)."""
        self.transport = transport
        #: Read once: the services a forget reaches, through their kinds' clients.
        self.kinds = MemoryKinds.from_entry_points() if kinds is None else kinds
        if forget_targets is None:
            forget_targets = functools.partial(targets, kinds=self.kinds)
        self._queues, self._targets, self._audit = queues, forget_targets, audit
        self._timeout, self._forget_timeout = timeout, forget_timeout
        self._rpcs: dict[tuple[str, str, str], RequestResponseClient[Any, Any]] = {}
        self._producers: dict[str, Producer] = {}
        self._lock = asyncio.Lock()

    async def _client(self, cls: type[C], where: Where) -> C:
        service = cls.service
        key = (service.name, where.workspace, where.flow)
        async with self._lock:
            rpc = self._rpcs.get(key)
            if rpc is None:
                q = self._queues(service.name, where.workspace, where.flow)
                rpc = RequestResponseClient(
                    self.transport, q.request, q.response, service.response_schema, subscriber=NAME
                )
                await rpc.start()
                self._rpcs[key] = rpc
        return cls(rpc, timeout=self._timeout)

    async def facts(self, where: Where) -> FactClient:
        return await self._client(FactClient, where)

    async def episodes(self, where: Where) -> EpisodeClient:
        return await self._client(EpisodeClient, where)

    async def conversations(self, where: Where) -> ConversationClient:
        return await self._client(ConversationClient, where)

    async def playbook(self, where: Where) -> PlaybookClient:
        return await self._client(PlaybookClient, where)

    def audit_queue(self, where: Where) -> str:
        return self._audit(where.workspace, where.flow)

    async def forget(self, where: Where, user: str, collection: str) -> list[Report]:
        """Forget ``user`` at every service and the learner: one report per service."""
        return await forget_user(
            self.transport,
            self._targets(where.workspace, where.flow),
            kinds=self.kinds,
            user=user,
            collection=collection,
            timeout=self._forget_timeout,
        )

    async def audited(
        self,
        where: Where,
        operation: str,
        *,
        collection: str | None,
        user: str | None,
        conversation: str | None = None,
        counts: Mapping[str, int] | None = None,
        grantees: list[str] | None = None,
    ) -> AuditEvent:
        """Record an inspector action on the flow's audit queue (ids and counts only)."""
        event = AuditEvent(
            event_id=str(uuid.uuid4()),
            time=time.time(),
            processor=NAME,
            workspace=where.workspace,
            flow=where.flow,
            collection=collection,
            user=user or None,
            conversation_id=conversation or None,
            operation=operation,
            grantees=grantees or [],
            counts=dict(counts or {}),
            request_id=str(uuid.uuid4()),
        )
        name = self.audit_queue(where)
        async with self._lock:
            producer = self._producers.get(name)
            if producer is None:
                producer = await self.transport.producer(Queue.parse(name))
                self._producers[name] = producer
        await producer.send(event.encode(), {"id": event.request_id or ""})
        return event

    async def close(self) -> None:
        for rpc in self._rpcs.values():
            await rpc.close()
        for producer in self._producers.values():
            await producer.close()
        self._rpcs.clear()
        self._producers.clear()
