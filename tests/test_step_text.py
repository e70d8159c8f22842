"""One rendering of an agent step: the text the agent's LLM reads is the text working memory
counts against its threshold and the text the learner records."""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.agent import prompt
from react_mem.learner.records import trajectory_record
from react_mem.schema.agent import AgentStep
from react_mem.schema.trajectory import PARSE_ERROR_ACTION, Trajectory
from react_mem.schema.working import SUMMARY_STEP_TYPE
from react_mem.text import STEP_SEPARATOR, clip, first_json, one_line, render_step
from react_mem.tokens import count_steps

STEPS = [
    AgentStep(step_type=SUMMARY_STEP_TYPE, observation="looked up two cities"),
    AgentStep(thought="check", action="lookup", arguments={"q": "Zürich"}, observation="47°N"),
    AgentStep(action=PARSE_ERROR_ACTION, observation="Your reply could not be parsed: no Action"),
    AgentStep(thought="retry", action="lookup", arguments={}, observation="ok"),
]


class Recording:
    """A token counter that records the texts it is asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def test_working_memory_counts_the_text_the_llm_reads() -> None:
    counter = Recording()
    count_steps(counter, STEPS)
    user = prompt.user_prompt("", STEPS, "Which is further north?")
    shown = user.split("Working Memory:\n", 1)[1].split("\n\nQuestion:", 1)[0]
    assert shown.split(STEP_SEPARATOR) == counter.texts


def test_the_rendering() -> None:
    summary, action, malformed, empty_args = (render_step(s) for s in STEPS)
    assert summary == "Summary of earlier steps: looked up two cities"
    assert action == 'Thought: check\nAction: lookup\nArgs: {"q": "Zürich"}\nObservation: 47°N'
    # The parse-error marker is no tool: neither the LLM nor the learner sees it.
    assert malformed == "Observation: Your reply could not be parsed: no Action"
    assert empty_args == "Thought: retry\nAction: lookup\nArgs: {}\nObservation: ok"


def test_the_learner_records_the_same_text_on_one_line() -> None:
    t = Trajectory(trajectory_id="t", question="q", answer="a", steps=STEPS, outcome="success")
    record = trajectory_record(t, max_chars=4000)
    for n, step in enumerate(STEPS, 1):
        assert f"Step {n}: {one_line(render_step(step))}" in record
    assert PARSE_ERROR_ACTION not in record


def test_clip_and_first_json() -> None:
    assert clip("one two three", 9) == "one two…"
    assert clip("short", 9) == "short"
    assert first_json('Sure! ```json\n{"a": [1, {"b": 2}]}\n``` done') == {"a": [1, {"b": 2}]}
    assert first_json("{not json} then [1, 2]") == [1, 2]
    assert first_json("no json here") is None
