"""The learner's counters and its lag gauge in TrustGraph's ``tg_`` style, created once per
registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from react_mem.metrics import per_registry


@dataclass(frozen=True)
class LearnerFamilies:
    learned: Counter
    duplicates: Counter
    degraded: Counter
    ace: Counter
    feedback: Counter
    rejected: Counter
    evicted: Counter
    notices: Counter
    records: Counter
    ungrounded: Counter
    age: Gauge


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
            "Writes a memory service refused for good (reason: its error type, e.g. "
            "quota-exceeded); recorded, not retried",
            ["processor", "kind", "reason"],
            registry=registry,
        ),
        evicted=Counter(
            "tg_memory_learner_evicted_total",
            "Memories a service evicted at a quota to store what the user asked to remember",
            ["processor", "kind"],
            registry=registry,
        ),
        notices=Counter(
            "tg_memory_learner_quota_notices_total",
            "Quota notices the learner left for the user's next answer (outcome: left, "
            "no-conversation, refused)",
            ["processor", "kind", "action", "outcome"],
            registry=registry,
        ),
        records=Counter(
            "tg_memory_learner_records_total",
            "Records learned, by outcome: learned (every write done), partial (a write was "
            "refused), empty (nothing to learn), forgotten (its owner was forgotten since)",
            ["processor", "kind", "outcome"],
            registry=registry,
        ),
        ungrounded=Counter(
            "tg_memory_learner_ungrounded_total",
            "What the LLM proposed that was not said in the conversation, dropped: facts "
            "whose key terms the user never said, summaries not made of the conversation",
            ["processor", "kind"],
            registry=registry,
        ),
        age=Gauge(
            "tg_memory_learner_trajectory_age_seconds",
            "Seconds since the oldest trajectory being learned finished (its finished_at): "
            "how far the learner lags behind the agent; 0 when idle",
            ["processor"],
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

    def rejected(self, kind: str, reason: str) -> None:
        self._fam.rejected.labels(processor=self._processor, kind=kind, reason=reason).inc()

    def evicted(self, kind: str, count: int) -> None:
        self._fam.evicted.labels(processor=self._processor, kind=kind).inc(count)

    def notice(self, kind: str, action: str, outcome: str) -> None:
        labels = {"kind": kind, "action": action, "outcome": outcome}
        self._fam.notices.labels(processor=self._processor, **labels).inc()

    def ungrounded(self, kind: str, count: int) -> None:
        if count:
            self._fam.ungrounded.labels(processor=self._processor, kind=kind).inc(count)

    def record(self, kind: str, outcome: str) -> None:
        self._fam.records.labels(processor=self._processor, kind=kind, outcome=outcome).inc()

    def feedback(self, result: str) -> None:
        self._fam.feedback.labels(processor=self._processor, result=result).inc()


class Lag:
    """The trajectories being learned, by when they finished; read at scrape time as
    ``tg_memory_learner_trajectory_age_seconds``, so a learner stuck on one still shows it."""

    def __init__(
        self, registry: CollectorRegistry | None, processor: str, clock: Callable[[], float]
    ) -> None:
        self._clock = clock
        self._finished: dict[int, float] = {}
        self._next = 0
        _families(registry).age.labels(processor=processor).set_function(self.seconds)

    def seconds(self) -> float:
        if not self._finished:
            return 0.0
        return max(0.0, self._clock() - min(self._finished.values()))

    def begin(self, finished_at: float) -> int:
        """Track a trajectory until :meth:`end`; one without a finish time is not tracked."""
        self._next += 1
        if finished_at > 0:
            self._finished[self._next] = finished_at
        return self._next

    def end(self, token: int) -> None:
        self._finished.pop(token, None)
