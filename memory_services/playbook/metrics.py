"""Playbook metrics in TrustGraph's ``tg_`` style, families created once per registry:

- ``tg_playbook_changes_total{processor, change}``: bullet changes (added, reinforced,
  updated, tagged, removed, merged, pruned);
- ``tg_playbook_deltas_total{processor, status}``: deltas ``applied``, ``duplicate``
  (a delta id applied before), ``rejected`` (bad input) or ``failed``;
- ``tg_memory_items{processor, kind="bullet"}``: bullets held (shared memory-size gauge).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter

from memory_services.metrics import memory_items
from react_mem.metrics import per_registry
from react_mem.schema.playbook import BulletChange


def _create(registry: CollectorRegistry) -> tuple[Counter, Counter]:
    return (
        Counter(
            "tg_playbook_changes",
            "Playbook bullet changes, by kind",
            ["processor", "change"],
            registry=registry,
        ),
        Counter(
            "tg_playbook_deltas",
            "Playbook deltas, by outcome",
            ["processor", "status"],
            registry=registry,
        ),
    )


_counters = per_registry(_create)


class PlaybookMetrics:
    """The playbook families, bound to one processor."""

    def __init__(self, processor: str, registry: CollectorRegistry | None = None) -> None:
        self.processor = processor
        self._changes, self._deltas = _counters(registry)
        self.bullets = memory_items(registry).labels(processor=processor, kind="bullet")

    def changed(self, changes: Iterable[BulletChange]) -> None:
        for change in changes:
            self._changes.labels(processor=self.processor, change=change.change).inc()

    def delta(self, status: str) -> None:
        self._deltas.labels(processor=self.processor, status=status).inc()
