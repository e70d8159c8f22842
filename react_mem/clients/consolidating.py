"""The operations fact and episode memory share: consolidate, unconsolidate (and undo)."""

from __future__ import annotations

from typing import Any

from react_mem.clients.base import Req, Resp, ServiceClient, build, owner
from react_mem.errors import BadReply
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.scope import Scope


class ConsolidatingClient(ServiceClient[Req, Resp]):
    """A client whose service merges near-duplicates on demand (consolidation/engine.py)."""

    async def consolidate(
        self,
        scope: Scope,
        *,
        consolidation_id: str | None = None,
        similarity_threshold: float | None = None,
        importance_threshold: float | None = None,
        min_importance: float | None = None,
        dry_run: bool = False,
    ) -> ConsolidationReport:
        """Merge ``scope``'s near-duplicate, unimportant memories (``dry_run``: only report)."""
        return await self._consolidation(
            operation="consolidate",
            consolidation_id=consolidation_id,
            similarity_threshold=similarity_threshold,
            importance_threshold=importance_threshold,
            min_importance=min_importance,
            dry_run=dry_run,
            **owner(scope),
        )

    async def unconsolidate(self, scope: Scope, consolidation_id: str) -> ConsolidationReport:
        """Undo the pass ``consolidation_id`` exactly."""
        return await self._consolidation(
            operation="unconsolidate", consolidation_id=consolidation_id, **owner(scope)
        )

    async def _consolidation(self, **fields: Any) -> ConsolidationReport:
        response = await self.call(build(self.service.request_schema, **fields))
        report = getattr(response, "consolidation", None)
        if not isinstance(report, ConsolidationReport):
            name = self.service.name
            raise BadReply(f"{name}: consolidation reply without its report", service=name)
        return report
