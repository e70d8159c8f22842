"""The learner's counters in TrustGraph's ``tg_`` style, created once per registry."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from react_mem.metrics import per_registry


@dataclass(frozen=True)
class LearnerFamilies:
    learned: Counter
    duplicates: Counter
    degraded: Counter
    ace: Counter
    feedback: Counter
    rejected: Counter


def _create(registry: CollectorRegistry) -> LearnerFamilies:
    return LearnerFamilies(
        learned=Counter(
            "tg_memory_learned_total",
            "Memories the learner wrote (fact, episode, summary)",
            ["processor", "kind"],
            registry=registry,
        ),
        duplicates=Counter(
            "tg_memory_learner_duplicates_total",
            "Redelivered records and writes the learner found already done",
            ["processor", "kind"],
            registry=registry,
        ),
        degraded=Counter(
            "tg_memory_learner_degraded_total",
            "Records learned without the LLM because it stayed unavailable",
            ["processor"],
            registry=registry,
        ),
        ace=Counter(
            "tg_memory_learner_ace_total",
            "Reflections and curations, by role and how they were made (llm, heuristic, "
            "llm+heuristic, heuristic-fallback)",
            ["processor", "role", "how"],
            registry=registry,
        ),
        feedback=Counter(
            "tg_memory_learner_feedback_total",
            "Feedback messages by result (learned, duplicate, unknown-session, ignored)",
            ["processor", "result"],
            registry=registry,
        ),
        rejected=Counter(
            "tg_memory_learner_rejected_total",
            "Writes a memory service rejected as invalid (not retried)",
            ["processor", "kind"],
            registry=registry,
        ),
    )


_families = per_registry(_create)


class LearnerMetrics:
    def __init__(self, registry: CollectorRegistry | None, processor: str) -> None:
        self._fam, self._processor = _families(registry), processor

    def learned(self, kind: str, count: int = 1) -> None:
        if count:
            self._fam.learned.labels(processor=self._processor, kind=kind).inc(count)

    def duplicate(self, kind: str, count: int = 1) -> None:
        if count:
            self._fam.duplicates.labels(processor=self._processor, kind=kind).inc(count)

    def degraded(self) -> None:
        self._fam.degraded.labels(processor=self._processor).inc()

    def ace(self, role: str, how: str) -> None:
        self._fam.ace.labels(processor=self._processor, role=role, how=how).inc()

    def rejected(self, kind: str) -> None:
        self._fam.rejected.labels(processor=self._processor, kind=kind).inc()

    def feedback(self, result: str) -> None:
        self._fam.feedback.labels(processor=self._processor, result=result).inc()
