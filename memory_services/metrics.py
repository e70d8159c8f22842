"""Memory-size gauges in TrustGraph's ``tg_`` style, created once per registry.

Every memory service in a process shares the family and differs by the ``processor`` and
``kind`` labels, as :mod:`react_mem.metrics` does for the framework's families (creating the
same family twice in one registry would fail when services run as a processor group).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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


def _quota_evictions(registry: CollectorRegistry) -> Counter:
    return Counter(
        "tg_memory_quota_evictions_total",
        "Records a memory service deleted to make room at a quota (by its retention rule)",
        ["processor", "kind"],
        registry=registry,
    )


#: ``tg_memory_quota_evictions_total{processor, kind}``.
quota_evictions = per_registry(_quota_evictions)


def _quota_refusals(registry: CollectorRegistry) -> Counter:
    return Counter(
        "tg_memory_quota_refusals_total",
        "Writes a memory service refused at a quota (quota: user or collection)",
        ["processor", "kind", "quota"],
        registry=registry,
    )


#: ``tg_memory_quota_refusals_total{processor, kind, quota}``.
quota_refusals = per_registry(_quota_refusals)


def _quota_notices(registry: CollectorRegistry) -> Counter:
    return Counter(
        "tg_memory_quota_notices_total",
        "Quota notices (a fact or episode evicted or refused after an answer) handed to "
        "the user's next answer in the conversation",
        ["processor", "kind", "action"],
        registry=registry,
    )


#: ``tg_memory_quota_notices_total{processor, kind, action}``.
quota_notices = per_registry(_quota_notices)


def _partition_passed(registry: CollectorRegistry) -> Counter:
    return Counter(
        "tg_memory_partition_passed_total",
        "Requests a partitioned replica settled unanswered: their owner is another's",
        ["processor"],
        registry=registry,
    )


#: ``tg_memory_partition_passed_total{processor}``.
partition_passed = per_registry(_partition_passed)
