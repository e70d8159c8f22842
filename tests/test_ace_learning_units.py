"""The ACE reflector and curator, the reflection window and the feedback keys, without a bus."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from react_mem.learner.ace import AceConfig, feedback_key, window_key
from react_mem.learner.curator import curate, heuristic_operations, similarity
from react_mem.learner.heuristic import heuristic_reflection, matches
from react_mem.learner.ledger import TrajectoryLedger
from react_mem.learner.llm import Complete, JsonLLM
from react_mem.learner.planner import Limits, Planner
from react_mem.learner.reflection import BulletTag, Correction, Lesson, Reflection
from react_mem.learner.reflector import reflect
from react_mem.schema import AgentStep, TextCompletionRequest, TextCompletionResponse
from react_mem.schema.agent import MemoryRef
from react_mem.schema.playbook import DeltaOperation, Feedback, RubricResult
from react_mem.schema.trajectory import Trajectory

B1 = MemoryRef(kind="bullet", id="b1", content="Look up family members in the knowledge base.")
B2 = MemoryRef(kind="bullet", id="b2", content="Answer in one sentence.")
FACT = MemoryRef(kind="fact", id="f1", content="Maria lives in Lisbon.")


def trajectory(**fields: Any) -> Trajectory:
    values: dict[str, Any] = {
        "trajectory_id": "s1",
        "session_id": "s1",
        "user": "alice",
        "question": "Where does my sister Maria live?",
        "answer": "Maria lives in Lisbon.",
        "steps": [
            AgentStep(
                thought="Look her up.",
                action="knowledge-query",
                arguments={"question": "Where does Maria live?"},
                observation="Maria lives in Lisbon.",
            )
        ],
        "memory_used": [B1, FACT, B2, B1],
    }
    return Trajectory(**(values | fields))


def tags(reflection: Reflection) -> dict[str, str]:
    return {t.id: t.tag for t in reflection.bullet_tags}


# -- the heuristic reflector --------------------------------------------------------------
def test_a_success_tags_the_bullets_used_helpful_and_yields_a_success_lesson() -> None:
    r = heuristic_reflection(trajectory())
    assert r.verdict == "positive" and r.by == "heuristic"
    assert tags(r) == {"b1": "helpful", "b2": "helpful"}  # bullets only, each once
    [lesson] = r.lessons
    assert lesson.type == "success" and lesson.section == "strategies"
    assert "knowledge-query" in lesson.content and "1 step" in lesson.content
    assert lesson.tags == ["success", "knowledge-query"]


def test_a_failure_tags_harmful_and_learns_from_the_error() -> None:
    error = "No final answer within max-iterations (5); the last step was: nothing"
    r = heuristic_reflection(trajectory(outcome="failure", answer="", error=error))
    assert r.verdict == "negative" and set(tags(r).values()) == {"harmful"}
    assert r.lessons[0].type == "failure" and "max-iterations (5)" in r.lessons[0].content
    assert r.error_identification.startswith("No final answer")


def test_tool_errors_parse_retries_and_the_lesson_cap() -> None:
    steps = [
        AgentStep(action="weather", step_type="tool-error", observation="unknown city 'Lisbn'"),
        AgentStep(action="weather", step_type="tool-error", observation="timeout"),
        AgentStep(action="weather", observation="Sunny, 24C"),
    ]
    t = trajectory(outcome="partial", steps=steps, tool_errors=2, parse_retries=1)
    r = heuristic_reflection(t, limit=5)
    assert r.verdict == "neutral" and set(tags(r).values()) == {"neutral"}
    assert [x.type for x in r.lessons] == ["tool", "tool"]
    # The tool's name is the lesson; the user's word in its error is not.
    assert "weather" in r.lessons[0].content and "Lisbn" not in r.lessons[0].content
    assert "format" in r.lessons[1].content
    assert len(heuristic_reflection(t, limit=1).lessons) == 1
    assert heuristic_reflection(t, limit=0).lessons == []


def test_a_ground_truth_mismatch_is_a_failure_whatever_the_agent_thought() -> None:
    wrong = heuristic_reflection(trajectory(ground_truth="Porto"))
    assert wrong.verdict == "negative" and set(tags(wrong).values()) == {"harmful"}
    lesson = wrong.lessons[0].content
    assert "expected one" in lesson and "Porto" not in lesson and "Maria" not in lesson
    assert heuristic_reflection(trajectory(ground_truth="lisbon")).verdict == "positive"
    assert matches("The answer is 4.", "4") and not matches("It is 42.", "4")
    assert matches("Lisbon, Portugal", "lisbon portugal")


def test_feedback_decides_the_verdict_and_only_its_own_lessons_are_learned() -> None:
    t = trajectory(outcome="failure", error="boom", answer="Maria lives in Lisbon.")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"rating": 0.5}, "positive"),
        ({"rating": -1.0, "helpful": True}, "negative"),  # rating first
        ({"rating": 0.0}, "neutral"),
        ({"helpful": False}, "negative"),
        ({"rubric": [RubricResult(name="cites a source", passed=True)]}, "positive"),
        ({"ground_truth": "Porto"}, "negative"),
        ({"comment": "thanks"}, "neutral"),
    ]
    for fields, expected in cases:
        r = heuristic_reflection(t, Feedback(session_id="s1", **fields))
        assert r.verdict == expected, fields
    rubric = [
        RubricResult(name="names the district", passed=False, comment="Alfama is missing"),
        RubricResult(name="one sentence", passed=True),
    ]
    r = heuristic_reflection(t, Feedback(session_id="s1", rubric=rubric, comment="Too vague"))
    assert r.verdict == "negative" and set(tags(r).values()) == {"harmful"}
    assert [x.content for x in r.lessons] == [
        "Make sure the answer meets names the district: Alfama is missing.",
        "A user objected to an answer to where questions; weigh this approach there.",
    ]  # the question and the user's comment stay out; nothing about the trajectory's own
    # error: that was learned with it


# -- the LLM reflector --------------------------------------------------------------------
def scripted(*replies: str | None) -> tuple[JsonLLM, list[TextCompletionRequest]]:
    """A JsonLLM answering with ``replies`` in turn (the last repeated); the prompts kept."""
    asked: list[TextCompletionRequest] = []

    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        asked.append(request)
        reply = replies[min(len(asked), len(replies)) - 1]
        return TextCompletionResponse(response=reply or "")

    return JsonLLM(complete, attempts=2), asked


REFLECTION = {
    "reasoning": "The knowledge base had it.",
    "error_identification": "",
    "root_cause": "",
    "correct_approach": "Query the knowledge base first.",
    "key_insight": "Family questions are answered from the knowledge base.",
    "lessons": [
        {"content": "Query the knowledge base before answering family questions.", "type": "tool"},
        "Short answers read better for simple lookups.",  # a bare string is a lesson too
        {"content": "Too short", "type": "domain"},
        {"type": "success"},
        {"content": "Cite where an answer came from.", "type": "nonsense", "tags": [3, "Cite!"]},
    ],
    "bullet_tags": [
        {"id": "b1", "tag": "helpful"},
        {"id": "b9", "tag": "harmful"},  # not in the prompt
        {"id": "b2", "tag": "sometimes"},
    ],
    "corrections": [
        {"id": "b2", "content": "", "reason": "obsolete"},
        {"id": "b7", "content": "Whatever it says.", "reason": "not in the prompt"},
    ],
}


async def test_the_llm_reflection_is_checked_item_by_item_and_gaps_are_filled() -> None:
    llm, asked = scripted(json.dumps(REFLECTION))
    r = await reflect(llm, trajectory(), limit=5, window=["Question: earlier; verdict: negative"])
    assert r.by == "llm" and r.key_insight.startswith("Family questions")
    assert [(x.content, x.type) for x in r.lessons] == [
        ("Query the knowledge base before answering family questions.", "tool"),
        ("Short answers read better for simple lookups.", "domain"),
        ("Cite where an answer came from.", "domain"),
    ]
    assert r.lessons[0].section == "tool use" and r.lessons[2].tags == ["cite"]
    # b2's tag was invalid: the heuristic's (helpful on success) fills it.
    assert tags(r) == {"b1": "helpful", "b2": "helpful"}
    assert r.corrections == [Correction(id="b2", content="", reason="obsolete")]
    [request] = asked
    assert request.response_format == "json" and "lessons" in request.schema_["properties"]
    assert "- [b1] (relied on) Look up family members" in request.prompt
    assert "Recent reflections on this context (oldest first):\n1. Question: earlier" in (
        request.prompt
    )


async def test_rubric_results_reach_the_reflector_as_pass_fail_lines() -> None:
    llm, asked = scripted(
        json.dumps(REFLECTION | {"bullet_tags": [{"id": "b1", "tag": "helpful"}]})
    )
    feedback = Feedback(
        session_id="s1",
        helpful=False,
        comment="Missing the district.",
        rubric=[
            RubricResult(name="names the district", passed=False, comment="no Alfama"),
            RubricResult(name="one sentence", passed=True),
        ],
    )
    r = await reflect(llm, trajectory(), feedback)
    prompt = asked[0].prompt
    assert "Rubric results:\nFAIL: names the district (no Alfama)\nPASS: one sentence" in prompt
    assert "User feedback: not helpful" in prompt and "Comment: Missing the district." in prompt
    # The user judged the answer: the bullets follow the feedback, not the LLM's tags.
    assert tags(r) == {"b1": "harmful", "b2": "harmful"}


async def test_junk_from_the_llm_reflector_falls_back_to_the_heuristic() -> None:
    llm, asked = scripted('Sure! {"lessons": "be better"}', "no json")
    r = await reflect(llm, trajectory())
    assert len(asked) == 2  # retried once
    assert r.by == "heuristic-fallback"
    assert r.lessons == heuristic_reflection(trajectory()).lessons


# -- the curator ----------------------------------------------------------------------------
def reflection(*lessons: str, corrections: list[Correction] | None = None) -> Reflection:
    return Reflection(
        verdict="positive",
        lessons=[
            Lesson(content=c, type="tool", section="tool use", tags=["tool"]) for c in lessons
        ],
        bullet_tags=[BulletTag(id="b1", tag="helpful"), BulletTag(id="b2", tag="harmful")],
        corrections=corrections or [],
    )


def test_the_heuristic_curator_tags_adds_and_reinforces_instead_of_cloning() -> None:
    same = "Look up family members in the knowledge base!"  # b1 in other punctuation
    near = "Look up family members in the knowledge base first."  # Jaccard 8/9 < 0.9
    assert similarity(same, B1.content) == 1.0 and similarity(near, B1.content) < 0.9
    ops = heuristic_operations(
        reflection(same, near, near.upper()), [B1, B2], user="alice", source="trajectory:s1"
    )
    assert [(o.type, o.bullet_id, o.helpful, o.harmful) for o in ops] == [
        ("TAG", "b1", 2, 0),  # tagged helpful, and reinforced once by the first lesson
        ("TAG", "b2", 0, 1),
        ("ADD", None, 1, 0),  # the second lesson; its upper-case copy is not added again
    ]
    add = ops[2]
    assert add.content == near and add.section == "tool use" and add.memory_type == "procedural"
    assert add.user == "alice" and add.metadata["learned-from"] == "trajectory:s1"


def test_corrections_update_or_remove_and_a_removed_bullet_is_not_tagged() -> None:
    fixes = [
        Correction(id="b2", content=""),
        Correction(id="b1", content="Look up relatives in the knowledge base first."),
        Correction(id="b1", content=""),  # the first edit of a bullet wins
        Correction(id="b9", content=""),  # not in the prompt
    ]
    ops = heuristic_operations(reflection(corrections=fixes), [B1, B2])
    assert [(o.type, o.bullet_id) for o in ops] == [
        ("TAG", "b1"),
        ("REMOVE", "b2"),
        ("UPDATE", "b1"),
    ]
    assert ops[2].content == "Look up relatives in the knowledge base first."


async def test_the_llm_curator_keeps_sound_operations_and_loses_no_lesson() -> None:
    lessons = (
        "Query the knowledge base before answering family questions.",
        "Reply in exactly the requested format.",
    )
    reply = {
        "reasoning": "...",
        "operations": [
            {"type": "ADD", "content": "Check the knowledge base before answering about family."},
            {"type": "TAG", "bullet_id": "b9"},  # not in the prompt
            {"type": "UPDATE", "bullet_id": "b2", "content": "Answer in one short sentence."},
            {"type": "REMOVE"},
            {"type": "EXPLODE", "bullet_id": "b1"},
        ],
    }
    llm, asked = scripted(json.dumps(reply))
    ops, how = await curate(llm, reflection(*lessons), [B1, B2], user="alice")
    assert how == "llm+heuristic"
    assert [(o.type, o.bullet_id, o.content) for o in ops] == [
        ("TAG", "b1", None),
        ("TAG", "b2", None),
        ("UPDATE", "b2", "Answer in one short sentence."),
        ("ADD", None, "Check the knowledge base before answering about family."),
        ("ADD", None, "Reply in exactly the requested format."),  # the LLM dropped it
    ]
    assert ops[3].section == "tool use"  # from the lesson it carries
    assert "- [b1] Look up family members" in asked[0].prompt and "Lessons:" in asked[0].prompt


async def test_junk_from_the_llm_curator_yields_the_heuristic_delta() -> None:
    r = reflection("Query the knowledge base before answering family questions.")
    llm, asked = scripted("no json", '{"operations": "add it"}')
    ops, how = await curate(llm, r, [B1, B2])
    assert how == "heuristic-fallback" and len(asked) == 2
    assert ops == heuristic_operations(r, [B1, B2])
    assert [o.type for o in ops] == ["TAG", "TAG", "ADD"]
    # No lessons: no question for the LLM at all.
    assert (await curate(llm, reflection(), [B1]))[1] == "heuristic" and len(asked) == 2


# -- the plan, the keys and the ledger -------------------------------------------------------
def answering(by_key: dict[str, Any]) -> Callable[[TextCompletionRequest], str]:
    def reply(request: TextCompletionRequest) -> str:
        asked = (request.schema_ or {}).get("properties", {})
        return next((json.dumps(v) for k, v in by_key.items() if k in asked), "no json")

    return reply


def llm_from(reply: Callable[[TextCompletionRequest], str]) -> tuple[JsonLLM, list[str]]:
    asked: list[str] = []

    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        asked.append(",".join((request.schema_ or {}).get("properties", {})))
        return TextCompletionResponse(response=reply(request))

    fn: Complete = complete
    return JsonLLM(fn), asked


async def test_a_plan_carries_the_delta_and_the_episode_reuses_the_llms_lessons() -> None:
    llm, asked = llm_from(answering({"bullet_tags": REFLECTION, "facts": {"facts": []}}))
    t = trajectory()
    plan = await Planner(llm, Limits()).for_trajectory(
        t, None, ace=AceConfig(reflector="llm"), key="trajectory:s1", window=[]
    )
    assert plan.ace is not None
    delta = plan.ace.delta
    assert delta.delta_id == "trajectory:s1" and delta.source == "trajectory:s1"
    # b2 is obsolete: removed, not tagged.
    assert [o.type for o in delta.operations] == ["TAG", "REMOVE", "ADD", "ADD", "ADD"]
    assert plan.ace.user == "alice" and plan.ace.collection == "default"
    assert plan.episode is not None
    assert plan.episode.lessons == [x.content for x in plan.ace.reflection.lessons]
    assert "lessons" not in asked  # no separate lessons question
    assert sum("bullet_tags" in a for a in asked) == 1
    assert delta.topic is None  # the request named no task type

    # A task type becomes the topic of the lessons added (the playbook's topic boost).
    typed = await Planner(llm, Limits()).for_trajectory(
        t.model_copy(update={"task_type": "unit-conversion"}),
        None,
        ace=AceConfig(reflector="llm"),
        key="trajectory:s2",
        window=[],
    )
    assert typed.ace is not None and typed.ace.delta.topic == "unit-conversion"

    # Chat without bullets, tools or a known answer: nothing to reflect on.
    chat = trajectory(steps=[AgentStep(thought="Hi!")], memory_used=[])
    assert (await Planner(None, Limits()).for_trajectory(chat, None, ace=AceConfig())).ace is None

    # Heuristic everything: no LLM question at all.
    quiet, none_asked = llm_from(answering({}))
    plan = await Planner(quiet, Limits(llm_lessons=False)).for_trajectory(
        t.model_copy(update={"extract_facts": False}),
        None,
        ace=AceConfig(reflector="heuristic"),
        key="k",
    )
    assert plan.ace is not None and plan.ace.reflection.by == "heuristic" and none_asked == []


async def test_feedback_plans_tag_the_trajectorys_bullets_with_their_own_delta_id() -> None:
    t = trajectory(context_scope_id="ctx-7")
    fb = Feedback(feedback_id="f1", session_id="s1", rating=1.0)
    plan = await Planner(None, Limits()).for_feedback(
        t, fb, AceConfig(), key="feedback:f1", window=[]
    )
    assert plan.ace is not None and plan.ace.context_scope_id == "ctx-7"
    assert plan.ace.delta.delta_id == "feedback:f1" and plan.ace.delta.source == "feedback:s1"
    assert plan.ace.delta.operations == [
        DeltaOperation(type="TAG", bullet_id="b1", helpful=1),
        DeltaOperation(type="TAG", bullet_id="b2", helpful=1),
    ]
    assert plan.summary is None and plan.facts == [] and plan.episode is None


def test_feedback_keys_are_stable_and_distinct() -> None:
    assert feedback_key(Feedback(feedback_id="f1", session_id="s1")) == "feedback:f1"
    a = Feedback(session_id="s1", rating=1.0)
    assert feedback_key(a) == feedback_key(Feedback.decode(a.encode()))
    assert feedback_key(a) != feedback_key(Feedback(session_id="s1", rating=-1.0))
    assert feedback_key(a).startswith("feedback:s1:")
    assert window_key(trajectory()) != window_key(trajectory(context_scope_id="other"))


async def test_the_reflection_window_holds_the_last_three_and_trajectories_are_kept(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    ledger = TrajectoryLedger(tmp_path / "l.sqlite3", retention=100, clock=lambda: now[0])
    await ledger.open()
    try:
        for n in range(5):
            await ledger.add_reflection("ws", "w", f"k{n}", f"r{n}")
        await ledger.add_reflection("ws", "w", "k1", "changed")  # a redelivery: kept as was
        await ledger.add_reflection("ws", "other", "x", "elsewhere")
        await ledger.add_reflection("ws2", "w", "k9", "another workspace")
        assert await ledger.reflections("ws", "w", 3) == ["r2", "r3", "r4"]
        assert await ledger.reflections("ws", "w", 3, before="k3") == ["r0", "r1", "r2"]
        assert await ledger.reflections("ws", "w", 3, before="new") == ["r2", "r3", "r4"]
        assert await ledger.reflections("ws", "w", 0) == []

        await ledger.save_trajectory("ws", "s1", '{"question": "q"}')
        assert await ledger.trajectory("ws", "s1") == '{"question": "q"}'
        assert await ledger.trajectory("ws2", "s1") is None
    finally:
        await ledger.close()

    now[0] += 101
    pruned = TrajectoryLedger(tmp_path / "l.sqlite3", retention=100, clock=lambda: now[0])
    await pruned.open()
    try:
        assert await pruned.trajectory("ws", "s1") is None
        assert await pruned.reflections("ws", "w", 3) == []
    finally:
        await pruned.close()


@pytest.mark.parametrize("limit", [1, 3])
def test_lessons_are_distinct_and_capped(limit: int) -> None:
    t = trajectory(outcome="failure", error="x", tool_errors=1, parse_retries=1)
    t.steps.append(AgentStep(action="search", step_type="tool-error", observation="bad query"))
    r = heuristic_reflection(t, limit=limit)
    assert len(r.lessons) == limit
    assert len({x.content for x in r.lessons}) == limit


# -- helpful only with evidence -------------------------------------------------------------
def test_a_bare_final_answer_is_no_evidence_bullets_stay_neutral() -> None:
    canned = trajectory(steps=[], answer="Hello! How can I help you today?")
    assert tags(heuristic_reflection(canned)) == {"b1": "neutral", "b2": "neutral"}
    # The same answer with evidence: a tool that ran, a ground truth it matches, feedback.
    assert tags(heuristic_reflection(trajectory()))["b1"] == "helpful"
    truth = canned.model_copy(update={"ground_truth": "Hello"})
    assert tags(heuristic_reflection(truth))["b1"] == "helpful"
    liked = Feedback(session_id="s1", helpful=True)
    assert tags(heuristic_reflection(canned, liked))["b1"] == "helpful"
    # A failed tool is no evidence of a good answer either.
    failed = AgentStep(action="knowledge-query", observation="boom", step_type="tool-error")
    assert tags(heuristic_reflection(canned.model_copy(update={"steps": [failed]})))["b1"] == (
        "neutral"
    )


async def test_the_llm_calling_a_bullet_helpful_is_not_evidence() -> None:
    canned = trajectory(steps=[], answer="Hello! How can I help you today?")
    said = REFLECTION | {
        "bullet_tags": [{"id": "b1", "tag": "helpful"}, {"id": "b2", "tag": "harmful"}]
    }
    llm, _ = scripted(json.dumps(said))
    assert tags(await reflect(llm, canned)) == {"b1": "neutral", "b2": "harmful"}
    llm, _ = scripted(json.dumps(said))
    assert tags(await reflect(llm, trajectory()))["b1"] == "helpful"  # a tool answered
