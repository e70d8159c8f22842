"""Playbook lessons carry nothing of the user (issue 13, defect 2): the heuristic reflector
phrases lessons by the kind of question, and every reflection (heuristic or LLM) loses the
lessons, corrections and notes that quote, number, name or copy the trajectory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from react_mem.learner.generic import leak
from react_mem.learner.heuristic import heuristic_reflection
from react_mem.learner.llm import JsonLLM
from react_mem.learner.reflector import reflect
from react_mem.schema.agent import AgentStep
from react_mem.schema.llm import TextCompletionRequest, TextCompletionResponse
from react_mem.schema.playbook import Feedback
from react_mem.schema.trajectory import Trajectory

SSN = "123-45-6789"
QUESTION = f"My SSN is {SSN}, can Dr Okonkwo file my Haldane claim form?"
ANSWER = "Dr Okonkwo can file the Haldane claim; the reference is HX-2291."


def trajectory(**fields: Any) -> Trajectory:
    values: dict[str, Any] = {
        "trajectory_id": "s1",
        "session_id": "s1",
        "user": "alice",
        "question": QUESTION,
        "answer": ANSWER,
        "steps": [
            AgentStep(
                action="claims",
                arguments={"query": "Haldane claim form"},
                observation=f"claim for ssn {SSN} not found",
                step_type="tool-error",
            ),
            AgentStep(action="knowledge-query", observation="Forms are filed by the clinic."),
        ],
    }
    return Trajectory(**(values | fields))


PRIVATE = (SSN, "Okonkwo", "Haldane", "HX-2291", "claim form", "123", "6789")


def carried(text: str) -> list[str]:
    return [p for p in PRIVATE if p.casefold() in text.casefold()]


@pytest.mark.parametrize(
    ("lesson", "why"),
    [
        ('Remember "the Haldane claim" wording.', "a quotation"),
        ("Reference numbers look like HX2291.", "a number or identifier"),
        ("Write to alice@example.com first.", "a number or identifier"),
        ("Try 6789 as the suffix.", "a number or identifier"),
        ("Ask whether Okonkwo is available.", "a name from the trajectory"),
        ("Check whether the can file the haldane claim works.", "words copied from the trajectory"),
    ],
)
def test_the_guard_refuses_user_content(lesson: str, why: str) -> None:
    assert leak(lesson, [QUESTION, ANSWER]) == why


@pytest.mark.parametrize(
    "lesson",
    [
        "For what questions, using knowledge-query gave a good answer in 2 steps.",
        "Check the tool name and its arguments before calling it.",
        "Confirm the date format before parsing dates.",
    ],
)
def test_generic_lessons_pass(lesson: str) -> None:
    assert leak(lesson, [QUESTION, ANSWER]) is None


def test_heuristic_lessons_carry_nothing_of_the_question_or_answer() -> None:
    cases = [
        trajectory(),
        trajectory(outcome="failure", error="no answer within max-iterations (5)"),
        trajectory(ground_truth="The clinic files it."),
    ]
    for t in cases:
        r = heuristic_reflection(t)
        assert r.lessons, t.outcome
        for text in [x.content for x in r.lessons] + [r.key_insight, r.error_identification]:
            assert carried(text) == [], text
    feedback = Feedback(session_id="s1", rating=-1.0, comment=f"Wrong, my SSN is {SSN}")
    r = heuristic_reflection(trajectory(), feedback)
    assert [x.content for x in r.lessons] == [
        "A user objected to an answer to tasks like this one; weigh this approach there."
    ]


async def test_an_llm_reflection_that_copies_the_user_is_stripped() -> None:
    reply = {
        "reasoning": "",
        "error_identification": "",
        "root_cause": f"The SSN {SSN} was not found.",
        "correct_approach": "Ask the clinic.",
        "key_insight": "Dr Okonkwo files claims.",
        "lessons": [
            {"content": f"Use SSN {SSN} for Dr Okonkwo's claims.", "type": "domain"},
            {"content": "Can Dr Okonkwo file my Haldane claim form? Yes.", "type": "domain"},
            {"content": "Ask which office files a form before answering.", "type": "tool"},
        ],
        "bullet_tags": [],
        "corrections": [],
    }

    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        return TextCompletionResponse(response=json.dumps(reply))

    r = await reflect(JsonLLM(complete, attempts=1), trajectory())
    assert r.by == "llm"
    assert [x.content for x in r.lessons] == ["Ask which office files a form before answering."]
    assert r.key_insight == "" and r.root_cause == ""
    assert r.correct_approach == "Ask the clinic."
