"""Playbook metrics in TrustGraph's ``tg_`` style, families created once per registry:

- ``tg_playbook_changes_total{processor, change}``: bullet changes (added, reinforced,
  updated, tagged, removed, merged, pruned);
- ``tg_playbook_deltas_total{processor, status}``: deltas ``applied``, ``duplicate``
  (a delta id applied before), ``rejected`` (bad input) or ``failed``;
- ``tg_memory_items{processor, kind="bullet"}``: bullets held (shared memory-size gauge).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from memory_services.metrics import memory_items
from memory_services.playbook.schema import BulletChange

_families: weakref.WeakKeyDictionary[CollectorRegistry, tuple[Counter, Counter]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _counters(registry: CollectorRegistry) -> tuple[Counter, Counter]:
    with _lock:
        found = _families.get(registry)
        if found is None:
            found = _families[registry] = (
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
        return found


class PlaybookMetrics:
    """The playbook families, bound to one processor."""

    def __init__(self, processor: str, registry: CollectorRegistry | None = None) -> None:
        registry = REGISTRY if registry is None else registry
        self.processor = processor
        self._changes, self._deltas = _counters(registry)
        self.bullets = memory_items(registry).labels(processor=processor, kind="bullet")

    def changed(self, changes: Iterable[BulletChange]) -> None:
        for change in changes:
            self._changes.labels(processor=self.processor, change=change.change).inc()

    def delta(self, status: str) -> None:
        self._deltas.labels(processor=self.processor, status=status).inc()
