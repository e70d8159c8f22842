"""Memory-size gauges in TrustGraph's ``tg_`` style, created once per registry.

Every memory service in a process shares the family and differs by the ``processor`` and
``kind`` labels, as :mod:`react_mem.metrics` does for the framework's families (creating the
same family twice in one registry would fail when services run as a processor group).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Histogram

from react_mem.metrics import per_registry


def _memory_items(registry: CollectorRegistry) -> Gauge:
    return Gauge(
        "tg_memory_items",
        "Records held by a memory service",
        ["processor", "kind"],
        registry=registry,
    )


#: ``tg_memory_items{processor, kind}``: records a memory service holds, by kind.
memory_items = per_registry(_memory_items)


def _index_duration(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "tg_memory_index_duration_seconds",
        "Automatic HNSW indexing runs of the embedded store (built in a child process)",
        ["processor", "collection"],
        buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300),
        registry=registry,
    )


#: ``tg_memory_index_duration_seconds{processor, collection}``: each indexing run's length.
index_duration = per_registry(_index_duration)
