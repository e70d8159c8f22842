"""Memory-size gauges in TrustGraph's ``tg_`` style, created once per registry.

Every memory service in a process shares the family and differs by the ``processor`` and
``kind`` labels, as :mod:`react_mem.metrics` does for the framework's families (creating the
same family twice in one registry would fail when services run as a processor group).
"""

from __future__ import annotations

import threading
import weakref

from prometheus_client import REGISTRY, CollectorRegistry, Gauge

_gauges: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def memory_items(registry: CollectorRegistry | None = None) -> Gauge:
    """``tg_memory_items{processor, kind}``: records a memory service holds, by kind."""
    registry = REGISTRY if registry is None else registry
    with _lock:
        gauge = _gauges.get(registry)
        if gauge is None:
            gauge = _gauges[registry] = Gauge(
                "tg_memory_items",
                "Records held by a memory service",
                ["processor", "kind"],
                registry=registry,
            )
        return gauge
