"""Audited operations: a service names them; this records each one that succeeds.

:meth:`Processor.serve_requests` wraps the handler when the processor declares
``audited_operations``: for a request whose ``operation`` is one of them, the replies are
held until the handler returns; then, if none carries an error, one :class:`AuditEvent` goes
to the flow's optional ``audit`` producer (the persistent ``flow:tg:memory-audit:…`` queue)
and to the ``react_mem.audit`` log as one JSON line, and the replies follow. A request that
fails (raises, or answers with an error) is not audited. A failed audit send fails the
request, so the consumer redelivers it (the operations audited are idempotent) and the
event, with the same ``event_id``, is sent again: at least once, before the answer.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

from react_mem.bus.transport import Receipt, received
from react_mem.processor.context import MessageContext
from react_mem.processor.specs import Handler
from react_mem.schema.audit import AuditEvent
from react_mem.schema.base import WireModel

#: The producer spec name a flow maps to ``flow:tg:memory-audit:{workspace}:{flow}``.
AUDIT = "audit"

audit_log = logging.getLogger("react_mem.audit")

_NAMESPACE = uuid.UUID("6f1c3d0e-51c4-4a0e-9d7e-2b8f0c6a9e13")


class _Held(MessageContext):
    """A context whose replies wait in :attr:`held` until the operation succeeded."""

    held: list[WireModel]

    async def reply(self, message: WireModel) -> None:
        self.held.append(message)

    async def reply_queued(self, message: WireModel) -> Receipt:
        self.held.append(message)
        return received()  # sent, if at all, when the operation has succeeded


def audited(
    handler: Handler,
    *,
    processor: str,
    operations: frozenset[str],
    clock: Callable[[], float],
    operation_of: Callable[[Any], object] = lambda message: getattr(message, "operation", None),
) -> Handler:
    """``handler``, auditing the requests whose ``operation`` is in ``operations``."""

    async def handle(message: Any, ctx: MessageContext) -> None:
        operation = operation_of(message)
        if operation not in operations:
            await handler(message, ctx)
            return
        held = _Held(**{f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)})
        held.held = []
        try:
            await handler(message, held)
        except BaseException:
            for reply in held.held:  # as they would have gone out before the failure
                await ctx.reply(reply)
            raise
        if held.held and all(getattr(r, "error", None) is None for r in held.held):
            await record(ctx, event(message, ctx, processor, str(operation), held.held, clock()))
        for reply in held.held:
            await ctx.reply(reply)

    return handle


def event(
    request: Any,
    ctx: MessageContext,
    processor: str,
    operation: str,
    replies: list[WireModel],
    now: float,
) -> AuditEvent:
    """The event for ``request`` answered by ``replies``: ids and counts, no contents."""
    flow = ctx.flow
    key = f"{processor}\x00{flow.workspace}\x00{flow.name}\x00{operation}\x00{ctx.id}"
    counts: dict[str, int] = {}
    for reply in replies:
        counts.update(_counts(reply))
    return AuditEvent(
        event_id=str(uuid.uuid5(_NAMESPACE, key)) if ctx.id else str(uuid.uuid4()),
        time=now,
        processor=processor,
        workspace=flow.workspace,
        flow=flow.name,
        collection=_text(request, "collection"),
        user=_text(request, "user") or None,
        conversation_id=_text(request, "conversation_id") or None,
        operation=operation,
        grantees=[g for g in getattr(request, "grantees", None) or [] if isinstance(g, str)],
        relation=_text(request, "relation"),
        counts=counts,
        request_id=ctx.id,
    )


async def record(ctx: MessageContext, audit: AuditEvent) -> None:
    """Log ``audit`` and send it on the flow's ``audit`` queue when the flow has one."""
    audit_log.info("audit %s", audit.model_dump_json())
    if ctx.flow.has_producer(AUDIT):
        await ctx.flow.send(AUDIT, audit, id=audit.request_id)


def _text(request: Any, name: str) -> str | None:
    value = getattr(request, name, None)
    return value if isinstance(value, str) else None


def _counts(model: BaseModel, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, int]]:
    """The integers a reply holds (e.g. ``count``, ``deleted``, ``forgotten.records.facts``),
    nested up to two levels; text and lists (contents, ids) are never read."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(value, int) and not isinstance(value, bool):
            yield key, value
        elif depth < 2 and isinstance(value, BaseModel):
            yield from _counts(value, f"{key}.", depth + 1)
        elif depth < 2 and isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool):
                    yield f"{key}.{k}", v
