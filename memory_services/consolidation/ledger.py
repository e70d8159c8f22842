"""The consolidation ledger: each pass's plan and report, under its consolidation id.

One record per (workspace, collection, user, consolidation id) in a small collection of the
service's own, searched never, read by id. The plan holds every field a pass changed with the
value before and after, so the pass can be finished after a crash and undone later.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from memory_services.store.base import CollectionSpec, Record, Scope, VectorStore
from react_mem.schema.consolidation import ConsolidationReport

_NAMESPACE = uuid.UUID("3b0e5a7c-2d41-5c8e-9f16-7a2b4c6d8e90")
_VECTOR = [1.0]  # entries are read by id, never searched


@dataclass
class Entry:
    """A pass: ``pending`` (planned, being applied), ``applied`` or ``undone``."""

    consolidation_id: str
    state: str
    report: ConsolidationReport
    #: One dict per cluster: survivor, absorbed, and the field values before and after.
    plan: list[dict[str, Any]] = field(default_factory=list)


class ConsolidationLedger:
    def __init__(self, store: VectorStore, collection: str) -> None:
        self._store = store
        self.collection = collection

    async def ensure(self) -> None:
        await self._store.ensure(CollectionSpec(self.collection, len(_VECTOR)))

    async def get(self, scope: Scope, consolidation_id: str) -> Entry | None:
        found = await self._store.get(self.collection, [_id(scope, consolidation_id)], scope=scope)
        if not found:
            return None
        p = found[0].payload
        return Entry(
            consolidation_id=p["consolidation_id"],
            state=p["state"],
            report=ConsolidationReport.model_validate_json(p["report"]),
            plan=json.loads(p["plan"]),
        )

    async def put(self, scope: Scope, entry: Entry, now: float) -> None:
        payload = scope.payload() | {
            "consolidation_id": entry.consolidation_id,
            "state": entry.state,
            "report": entry.report.model_dump_json(),
            "plan": json.dumps(entry.plan),
            "updated_at": now,
        }
        record = Record(_id(scope, entry.consolidation_id), payload, _VECTOR)
        await self._store.upsert(self.collection, [record])

    async def purge(self, scope: Scope) -> int:
        """Forget the passes of a purged collection or user (their plans hold field values
        of the purged memories); a conversation's purge leaves them. Returns how many."""
        if scope.conversation is None:
            return await self._store.delete(self.collection, scope=scope)
        return 0


def _id(scope: Scope, consolidation_id: str) -> str:
    key = "\x1f".join((scope.workspace, scope.collection, scope.user or "", consolidation_id))
    return str(uuid.uuid5(_NAMESPACE, key))
