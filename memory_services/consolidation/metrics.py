"""Consolidation bookkeeping shared by fact- and episode-memory: counters (created once per
registry), the schedule of automatic passes, and the log line of each pass that changed
something."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from react_mem.metrics import per_registry
from react_mem.schema.consolidation import ConsolidationReport

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Families:
    #: ``tg_memory_consolidated_total{processor, kind}``: memories absorbed by a merge.
    consolidated: Counter
    #: ``tg_memory_unconsolidated_total{processor, kind}``: absorbed memories restored.
    unconsolidated: Counter


def _create(registry: CollectorRegistry) -> Families:
    labels = ["processor", "kind"]
    return Families(
        consolidated=Counter(
            "tg_memory_consolidated",
            "Memories merged into another by consolidation",
            labels,
            registry=registry,
        ),
        unconsolidated=Counter(
            "tg_memory_unconsolidated",
            "Merged memories restored by unconsolidate",
            labels,
            registry=registry,
        ),
    )


consolidation_counters = per_registry(_create)


class Consolidations:
    """One service's consolidation passes: when the next automatic one is due, and what
    each pass that changed something merged or restored (counted and logged)."""

    def __init__(
        self,
        registry: CollectorRegistry | None,
        processor: str,
        kind: str,
        interval: float | None,
    ) -> None:
        counters = consolidation_counters(registry)
        self._merged = counters.consolidated.labels(processor=processor, kind=kind)
        self._restored = counters.unconsolidated.labels(processor=processor, kind=kind)
        self.processor, self.kind, self.interval = processor, kind, interval
        self._next = time.monotonic() + (interval or 0.0)

    def due(self) -> bool:
        """True (and the next pass scheduled) when an automatic pass should run now."""
        if self.interval is None or time.monotonic() < self._next:
            return False
        self._next = time.monotonic() + self.interval
        return True

    async def run_if_due(
        self, consolidate_all: Callable[[str], Awaitable[Sequence[ConsolidationReport]]]
    ) -> None:
        """A scheduled pass over every collection (``consolidate_all(pass_id)``), when due."""
        if self.due():
            for report in await consolidate_all(f"scheduled-{uuid.uuid4()}"):
                self.record(report, changed=True, undone=False)

    def record(self, report: ConsolidationReport, *, changed: bool, undone: bool) -> None:
        """Count and log a pass; a repeated (redelivered) one has ``changed`` false."""
        if not changed:
            return
        if undone:
            self._restored.inc(report.restored)
        else:
            self._merged.inc(report.merged)
        if report.merged or report.restored:
            logger.info(
                "%s: %s %s: %d %ss merged, %d restored, %d preserved, %d bytes saved",
                self.processor,
                "unconsolidate" if undone else "consolidate",
                report.consolidation_id,
                report.merged,
                self.kind,
                report.restored,
                report.preserved,
                report.bytes_saved,
            )
