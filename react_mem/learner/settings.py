"""The memory learner's settings: its limits, its LLM and memory-service budgets, its
ledger, and how it learns a playbook (ACE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from react_mem.learner.ace import AceConfig
from react_mem.learner.planner import Limits
from react_mem.processor.settings import ProcessorSettings


class LearnerSettings(ProcessorSettings):
    #: Records learned at once. Each waits mostly on the LLM and the memory services,
    #: whose queues it shares with the agent: one at a time falls behind under load.
    #: Records of one conversation are still learned one at a time, in order.
    concurrency: int = Field(default=16, ge=1, le=1000)
    #: Seconds to wait for one text completion, and attempts per question.
    llm_timeout: float = Field(default=120.0, gt=0)
    llm_attempts: int = Field(default=2, ge=1, le=10)
    #: Redeliveries spent waiting for an unavailable LLM before learning without it
    #: (deterministic summary, heuristic lessons, only explicitly requested facts).
    llm_outage_redeliveries: int = Field(default=2, ge=0)
    #: Seconds to wait for one memory-service call.
    memory_timeout: float = Field(default=30.0, gt=0)
    #: Until a memory service has answered, a call to it is sent again this often (its
    #: writes are idempotent): after a restart of the stack the learner's first calls
    #: would otherwise wait ``memory_timeout`` for a service that was not listening yet.
    memory_resend: float = Field(default=1.0, gt=0)
    #: Facts asked of the LLM per record (explicit "remember ..." requests come on top).
    max_facts: int = Field(default=5, ge=0, le=50)
    max_fact_chars: int = Field(default=400, ge=20)
    summary_chars: int = Field(default=2000, ge=100)
    prompt_chars: int = Field(default=8000, ge=500)
    #: An invocation without tools is recorded as an episode from this many steps.
    min_episode_steps: int = Field(default=2, ge=1)
    max_episode_steps: int = Field(default=40, ge=1, le=200)
    step_chars: int = Field(default=1000, ge=50)
    #: Lessons for an episode: asked of the LLM (at most this many), else heuristic.
    llm_lessons: bool = True
    max_lessons: int = Field(default=3, ge=0, le=10)
    #: Ask the LLM which stored facts each new fact updates or contradicts (see
    #: :mod:`react_mem.learner.changes`); fact-memory supersedes by rule either way.
    judge_fact_changes: bool = True
    #: Conversation end: promote facts, and record an episode from this many turns.
    promote_facts: bool = True
    conversation_episodes: bool = True
    min_conversation_turns: int = Field(default=3, ge=1)
    #: Importance of a fact the user explicitly asked to be remembered.
    explicit_importance: float = Field(default=0.8, ge=0.0, le=1.0)
    #: The ledger file; default ``state_dir/learner/<id>.sqlite3``.
    ledger_path: Path | None = None
    #: The ledger's texts are encrypted with this key (32+ characters; shared by replicas
    #: through config or a secret), else with one generated once in ``ledger_key_file``
    #: (default: the ledger's path + ``.key``). See ``learner/cipher.py``.
    ledger_key: SecretStr | None = None
    ledger_key_file: Path | None = None
    #: Days the ledger keeps records, trajectories (for feedback) and reflections; a
    #: workspace's agent-mem ``ledger-retention-days`` overrides it (at least as long as
    #: redeliveries and feedback may come late: exactly-once holds within it).
    ledger_retention_days: float = Field(default=7.0, gt=0)
    #: Learning waits (its messages kept and redelivered) while the disk under the ledger
    #: has less free than this; 0: never checked (see :mod:`react_mem.disk`).
    min_free_disk_mib: int = Field(default=64, ge=0)

    def ledger_file(self) -> Path:
        return self.ledger_path or self.state_dir / "learner" / f"{self.id}.sqlite3"

    #: ACE: learn a playbook where the flow has playbook-memory (seeds 001, 003).
    playbook: bool = True
    #: ``heuristic``: deterministic, no LLM; ``llm``: asked of the flow's text completion
    #: (JSON-constrained, retried), the heuristic whenever its replies stay malformed.
    reflector: Literal["heuristic", "llm"] = "heuristic"
    curator: Literal["heuristic", "llm"] = "heuristic"
    #: Earlier reflections of the same scope and conversation given to the reflector.
    reflection_window: int = Field(default=3, ge=0, le=20)
    #: Lessons per trajectory (or feedback) curated into the playbook.
    playbook_lessons: int = Field(default=3, ge=0, le=10)
    #: A lesson this similar to a bullet in the prompt reinforces it instead of cloning.
    reinforce_similarity: float = Field(default=0.9, gt=0.0, le=1.0)
    #: Redeliveries a feedback message waits for its trajectory to be learned.
    feedback_wait_redeliveries: int = Field(default=2, ge=0)

    def limits(self) -> Limits:
        return Limits(**{k: getattr(self, k) for k in Limits.__dataclass_fields__})

    def ace(self) -> AceConfig:
        return AceConfig(
            reflector=self.reflector,
            curator=self.curator,
            window=self.reflection_window,
            max_lessons=self.playbook_lessons,
            max_chars=self.max_fact_chars,
            prompt_chars=self.prompt_chars,
            similarity=self.reinforce_similarity,
        )


def agent_mem_flag(raw: str | None) -> bool:
    """An ``agent-mem`` switch (a JSON boolean) from config; absent or unreadable means the
    default, on."""
    if raw is None:
        return True
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw.strip().lower()
    return value not in (False, "false", "no", "off", 0)
