"""Prometheus metrics with TrustGraph's names and labels, on an injectable registry.

Every family is created once per registry, so processors sharing a process (a processor
group) share families and differ by the ``processor`` label; tests pass a fresh registry.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Enum, Gauge, Histogram, Info

BUCKETS_STANDARD = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


@dataclass(frozen=True)
class Families:
    processor_info: Info
    config_version: Gauge
    consumer_state: Enum
    consumer_duration: Histogram
    consumer_processing: Counter
    consumer_redelivery: Counter
    consumer_dead_letter: Counter
    producer_messages: Counter
    downstream_duration: Histogram
    downstream_timeout: Counter
    downstream_error: Counter
    background_dropped: Counter


def _create(registry: CollectorRegistry) -> Families:
    p, c = "processor", "consumer"
    return Families(
        processor_info=Info("tg_processor", "Processor configuration", [p], registry=registry),
        config_version=Gauge(
            "tg_config_version", "Config version known to this processor", [p], registry=registry
        ),
        consumer_state=Enum(
            "tg_consumer_state",
            "Consumer state",
            [p, c],
            states=["stopped", "running"],
            registry=registry,
        ),
        consumer_duration=Histogram(
            "tg_consumer_request_duration_seconds",
            "Request latency (seconds)",
            [p, c],
            buckets=BUCKETS_STANDARD,
            registry=registry,
        ),
        consumer_processing=Counter(
            "tg_consumer_processing_total",
            "Processing count",
            [p, c, "status"],
            registry=registry,
        ),
        consumer_redelivery=Counter(
            "tg_consumer_redelivery_total",
            "Messages handed back for redelivery",
            [p, c],
            registry=registry,
        ),
        consumer_dead_letter=Counter(
            "tg_consumer_dead_letter_total",
            "Messages moved to the dead-letter queue",
            [p, c, "reason"],
            registry=registry,
        ),
        producer_messages=Counter(
            "tg_producer_messages_total",
            "Output items produced",
            [p, "producer"],
            registry=registry,
        ),
        downstream_duration=Histogram(
            "tg_downstream_call_duration_seconds",
            "Downstream request/response call latency (seconds)",
            [p, "target_service"],
            buckets=BUCKETS_STANDARD,
            registry=registry,
        ),
        downstream_timeout=Counter(
            "tg_downstream_timeout_total",
            "Downstream call timeout count",
            [p, "target_service"],
            registry=registry,
        ),
        downstream_error=Counter(
            "tg_downstream_error_total",
            "Downstream call error count",
            [p, "target_service", "error_type"],
            registry=registry,
        ),
        background_dropped=Counter(
            "react_mem_background_dropped_total",
            "Work done after a reply (provenance) that was dropped: queue full, too slow, "
            "failed, or its flow stopped",
            [p, "work", "reason"],
            registry=registry,
        ),
    )


T = TypeVar("T")


def per_registry(
    create: Callable[[CollectorRegistry], T],
) -> Callable[[CollectorRegistry | None], T]:
    """``create``'s metric families, made once per registry (the global one by default):
    processors sharing a process share them, tests pass a fresh registry."""
    made: weakref.WeakKeyDictionary[CollectorRegistry, T] = weakref.WeakKeyDictionary()
    lock = threading.Lock()

    def families(registry: CollectorRegistry | None = None) -> T:
        registry = REGISTRY if registry is None else registry
        with lock:
            found = made.get(registry)
            if found is None:
                found = made[registry] = create(registry)
            return found

    return families


#: The metric families of a registry, created on first use.
families = per_registry(_create)


class ConsumerMetrics:
    def __init__(self, fam: Families, processor: str, consumer: str) -> None:
        self._fam, self._labels = fam, {"processor": processor, "consumer": consumer}
        for status in ("ok", "error"):
            fam.consumer_processing.labels(**self._labels, status=status)

    def state(self, state: str) -> None:
        self._fam.consumer_state.labels(**self._labels).state(state)

    def processed(self, status: str, seconds: float) -> None:
        self._fam.consumer_processing.labels(**self._labels, status=status).inc()
        self._fam.consumer_duration.labels(**self._labels).observe(seconds)

    def redelivered(self) -> None:
        self._fam.consumer_redelivery.labels(**self._labels).inc()

    def dead_lettered(self, reason: str) -> None:
        self._fam.consumer_dead_letter.labels(**self._labels, reason=reason).inc()


class ProducerMetrics:
    def __init__(self, fam: Families, processor: str, producer: str) -> None:
        self._counter = fam.producer_messages.labels(processor=processor, producer=producer)

    def sent(self) -> None:
        self._counter.inc()


class BackgroundMetrics:
    def __init__(self, fam: Families, processor: str) -> None:
        self._dropped = fam.background_dropped
        self._processor = processor

    def dropped(self, work: str, reason: str) -> None:
        self._dropped.labels(self._processor, work, reason).inc()


class DownstreamMetrics:
    def __init__(self, fam: Families, processor: str, target_service: str) -> None:
        self._fam = fam
        self._labels = {"processor": processor, "target_service": target_service}

    def observe(self, seconds: float) -> None:
        self._fam.downstream_duration.labels(**self._labels).observe(seconds)

    def timeout(self) -> None:
        self._fam.downstream_timeout.labels(**self._labels).inc()

    def error(self, error_type: str) -> None:
        self._fam.downstream_error.labels(**self._labels, error_type=error_type).inc()
