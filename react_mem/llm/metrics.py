"""LLM call metrics in TrustGraph's ``tg_`` style, created once per registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram

from react_mem.metrics import per_registry

if TYPE_CHECKING:
    from react_mem.llm.base import Completion

#: LLM calls take from milliseconds (a cached tiny model) to minutes (a long generation).
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True)
class _Families:
    duration: Histogram
    tokens: Counter
    requests: Counter


def _create(registry: CollectorRegistry) -> _Families:
    return _Families(
        duration=Histogram(
            "tg_llm_request_duration_seconds",
            "Text-completion latency, retries and streaming included (seconds)",
            ["processor", "model"],
            buckets=BUCKETS,
            registry=registry,
        ),
        tokens=Counter(
            "tg_llm_tokens_total",
            "Tokens in prompts (direction=in) and completions (direction=out)",
            ["processor", "model", "direction"],
            registry=registry,
        ),
        requests=Counter(
            "tg_llm_requests_total",
            "Text-completion requests by outcome",
            ["processor", "model", "outcome"],
            registry=registry,
        ),
    )


_families = per_registry(_create)


class LLMMetrics:
    def __init__(self, registry: CollectorRegistry | None, processor: str) -> None:
        self._fam, self._processor = _families(registry), processor

    def completed(self, completion: Completion, seconds: float, model: str) -> None:
        labels = {"processor": self._processor, "model": model}
        self._fam.duration.labels(**labels).observe(seconds)
        self._fam.requests.labels(**labels, outcome="ok").inc()
        for direction, count in (("in", completion.in_token), ("out", completion.out_token)):
            if count:
                self._fam.tokens.labels(**labels, direction=direction).inc(count)

    def failed(self, model: str) -> None:
        self._fam.requests.labels(processor=self._processor, model=model, outcome="error").inc()
