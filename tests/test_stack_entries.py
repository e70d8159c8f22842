"""The embedded stack's processors as ``react-mem up`` builds them (``react_mem.stack``)."""

from __future__ import annotations

import pytest

from react_mem.learner.settings import LearnerSettings
from react_mem.stack import LEARNER_ID, stack_entries


def judges(**options: object) -> bool:
    entries = stack_entries(settings_file=None, shared={}, **options)  # type: ignore[arg-type]
    (learner,) = [e for e in entries if e.settings.id == LEARNER_ID]
    assert isinstance(learner.settings, LearnerSettings)
    return learner.settings.judge_fact_changes


def test_the_learner_leaves_updates_to_the_slot_rules_on_the_small_in_process_model() -> None:
    assert judges(llm="llama-cpp") is False


def test_the_learner_judges_updates_with_an_endpoint_model() -> None:
    assert judges(llm="openai", llm_settings={"base_url": "http://localhost:9/v1"}) is True


def test_a_setting_that_asks_for_the_judgement_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACT_MEM_JUDGE_FACT_CHANGES", "true")
    assert judges(llm="llama-cpp") is True
