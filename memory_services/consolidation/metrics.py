"""Consolidation counters, created once per registry (shared by the memory services)."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter


@dataclass(frozen=True)
class Families:
    #: ``tg_memory_consolidated_total{processor, kind}``: memories absorbed by a merge.
    consolidated: Counter
    #: ``tg_memory_unconsolidated_total{processor, kind}``: absorbed memories restored.
    unconsolidated: Counter


_families: weakref.WeakKeyDictionary[CollectorRegistry, Families] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def consolidation_counters(registry: CollectorRegistry | None = None) -> Families:
    registry = REGISTRY if registry is None else registry
    with _lock:
        families = _families.get(registry)
        if families is None:
            labels = ["processor", "kind"]
            families = _families[registry] = Families(
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
        return families
