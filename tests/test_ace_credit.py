"""Credit assignment (seed 003: the generator cites bullet ids): the agent's reply names the
playbook bullets it relied on, in the constrained JSON schema or on a ``Bullets:`` line;
the trajectory carries what was shown and what was used, with the request's task type and
parent session, a success score and its cost; the reflector and curator credit or blame
only the bullets used, and the rest of the bullets shown only age (no mark at all)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from react_mem.agent import json_reply
from react_mem.agent.parse import Final, parse_reply
from react_mem.agent.streaming import StreamingReplyParser
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.learner.ace import AceConfig, plan_ace
from react_mem.learner.heuristic import heuristic_reflection
from react_mem.learner.planner import Limits, Planner
from react_mem.schema import AgentStep, TextCompletionRequest
from react_mem.schema.agent import MemoryRef
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.trajectory import Trajectory
from tests.support.agent_stack import Stack, agent_stack
from tests.test_agent_playbook import LOOKUP, PlaybookDouble, next_trajectory, trajectories

SHOWN = [
    MemoryRef(kind="bullet", id="b1", content="Convert the units before comparing values."),
    MemoryRef(kind="bullet", id="b2", content="Round only at the end of a calculation."),
    MemoryRef(kind="bullet", id="b3", content="Quote the source line of every figure."),
]


# -- the reply names the bullets ---------------------------------------------------------
def test_the_json_schema_lists_the_shown_ids_and_requires_a_list_only_when_bullets_show() -> None:
    plain = json_reply.schema(["lookup"])
    assert "bullets" not in plain["properties"] and plain["required"][-1] == "answer"
    cited = json_reply.schema(["lookup"], ["b1", "b2", "b1"])
    assert cited["properties"]["bullets"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["b1", "b2"]},
    }
    assert cited["required"] == ["thought", "action", "answer", "bullets"]


@pytest.mark.parametrize(
    ("bullets", "read"),
    [
        (["b1", "b2", "b1", 7, " "], ("b1", "b2")),  # once each; non-strings ignored
        ("b3", ("b3",)),
        ({"id": "b1"}, ()),  # a small model's slip is no citation, and no error
        (None, ()),
    ],
)
def test_a_json_reply_reads_its_bullets_leniently(bullets: Any, read: tuple[str, ...]) -> None:
    reply = {"thought": "t", "action": "final-answer", "answer": "42", "bullets": bullets}
    decision = json_reply.parse_json_reply(json.dumps(reply))
    assert isinstance(decision, Final) and decision.bullets == read
    tool = {"thought": "t", "action": "lookup", "answer": "", "args": {}, "bullets": bullets}
    assert json_reply.parse_json_reply(json.dumps(tool)).bullets == read


def test_a_text_reply_names_its_bullets_on_a_bullets_line() -> None:
    final = parse_reply("Thought: units first\nBullets: [b1], [b2]\nFinal Answer: 3 km")
    assert final == Final("units first", "3 km", ("b1", "b2"))
    action = parse_reply('Thought: x\n**Bullets used:** b3\nAction: lookup\nArgs: {"q": "a"}')
    assert action.bullets == ("b3",) and action.name == "lookup"
    assert parse_reply("Thought: x\nBullets: none\nFinal Answer: y").bullets == ()
    assert parse_reply("Thought: x\nFinal Answer: y").bullets == ()


def test_a_streamed_reply_skips_the_bullets_line_and_streams_the_answer() -> None:
    parser = StreamingReplyParser()
    text = "Thought: units first\nBullets: [b1]\nFinal Answer: 3 km"
    chunks = [c for part in (text[:20], text[20:40], text[40:]) for c in parser.feed(part)]
    chunks += parser.finish()
    said = {
        kind: "".join(c.text for c in chunks if c.kind == kind) for kind in ("thought", "answer")
    }
    assert said == {"thought": "units first", "answer": "3 km"}


# -- the agent records shown and used ---------------------------------------------------
def citing(request: TextCompletionRequest) -> str:
    """JSON replies: a tool call citing one shown bullet, then the answer citing another
    and an id the prompt never held."""
    if not request.system.startswith("You are a helpful agent"):
        return "{}"
    if "Observation" not in request.prompt:
        reply = {"thought": "look", "action": "lookup", "answer": "", "args": {"question": "x"}}
        return json.dumps(reply | {"bullets": ["error-00015"]})
    answer = {"thought": "done", "action": "final-answer", "answer": "Listed first."}
    return json.dumps(answer | {"bullets": ["file-ops-00042", "invented-7", "error-00015"]})


@pytest.mark.broker
async def test_the_trajectory_carries_the_bullets_used_task_type_parent_score_and_cost(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with (
        trajectories(transport, unique) as recorded,
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=citing,
            services=(),
            tools={"lookup": LOOKUP},
            playbook=PlaybookDouble,
            trajectories=True,
            agent_mem={"reply-format": "json"},
        ) as stack,
    ):
        got = await stack.ask(
            "Where are my backups?",
            user="ada",
            task_type="file-ops",
            parent_session_id="parent-1",
            session_id="child-1",
        )
        t = await next_trajectory(recorded)
        requests = [r for r in stack.llm.requests if r.system.startswith("You are a helpful")]
    assert got[-1].content == "Listed first."
    assert t.bullets_shown() == ["error-00015", "file-ops-00042", "error-00016"]
    assert t.bullets_used == ["error-00015", "file-ops-00042"]  # the invented id is ignored
    assert (t.task_type, t.parent_session_id, t.session_id) == ("file-ops", "parent-1", "child-1")
    assert t.outcome == "success" and t.score == 1.0
    assert t.duration_seconds > 0 and t.finished_at >= t.started_at
    for request in requests:  # every reasoning call may cite only what it was shown
        assert request.schema_ is not None
        assert request.schema_["properties"]["bullets"]["items"]["enum"] == [
            "error-00015",
            "file-ops-00042",
            "error-00016",
        ]
        assert json_reply.CITE in request.system


@pytest.mark.broker
async def test_without_bullets_the_text_prompt_asks_for_no_citation(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with (
        trajectories(transport, unique) as recorded,
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=lambda r: "Thought: easy\nBullets: [made-up]\nFinal Answer: 42",
            services=(),
            trajectories=True,
        ) as stack,
    ):
        await stack.ask("What is six times seven?", task_type="arithmetic")
        t = await next_trajectory(recorded)
        [request] = stack.llm.requests
    assert "Bullets:" not in request.system  # no playbook in the prompt, nothing to cite
    assert t.bullets_shown() == [] and t.bullets_used == []
    assert t.task_type == "arithmetic" and t.score == 1.0


# -- the reflector credits only what was used ---------------------------------------------
def trajectory(**fields: Any) -> Trajectory:
    values: dict[str, Any] = {
        "trajectory_id": "s1",
        "session_id": "s1",
        "question": "How far is 5 miles in kilometres?",
        "answer": "5 km",
        "ground_truth": "8.05 km",
        "steps": [AgentStep(thought="t", action="convert", observation="8.05")],
        "memory_used": SHOWN,
        "bullets_used": ["b2"],
    }
    return Trajectory(**(values | fields))


def marks(ops: list[Any]) -> dict[str, tuple[int, int, int]]:
    return {o.bullet_id: (o.helpful, o.harmful, o.neutral) for o in ops if o.type == "TAG"}


async def test_only_the_bullet_used_is_blamed_and_the_others_shown_get_no_mark() -> None:
    t = trajectory()
    reflection = heuristic_reflection(t)
    assert reflection.verdict == "negative"
    assert {x.id: x.tag for x in reflection.bullet_tags} == {"b2": "harmful"}
    plan = await plan_ace(None, t, AceConfig(), delta_id="d1", source="trajectory:s1")
    assert marks(plan.delta.operations) == {"b2": (0, 1, 0)}


async def test_a_success_credits_only_the_bullets_used() -> None:
    t = trajectory(answer="8.05 km", bullets_used=["b1", "b3"])
    plan = await plan_ace(None, t, AceConfig(), delta_id="d1", source="trajectory:s1")
    assert marks(plan.delta.operations) == {"b1": (1, 0, 0), "b3": (1, 0, 0)}


async def test_no_citation_marks_nothing_and_a_record_without_the_field_marks_all_shown() -> None:
    none = await plan_ace(None, trajectory(bullets_used=[]), AceConfig(), delta_id="d", source="t")
    assert marks(none.delta.operations) == {}
    legacy = await plan_ace(
        None, trajectory(bullets_used=None), AceConfig(), delta_id="d", source="t"
    )
    assert marks(legacy.delta.operations) == {b.id: (0, 1, 0) for b in SHOWN}


async def test_an_episode_whose_answer_missed_the_ground_truth_is_stored_as_a_failure() -> None:
    """What a later prompt recalls as "-> success" must have been one."""
    planner = Planner(None, Limits())
    wrong = (await planner.for_trajectory(trajectory(), None)).episode
    assert wrong is not None and (wrong.outcome, wrong.score) == ("failure", 0.0)
    assert not any("Answered with" in lesson for lesson in wrong.lessons)
    right = (await planner.for_trajectory(trajectory(answer="8.05 km"), None)).episode
    assert right is not None and (right.outcome, right.score) == ("success", 1.0)
    assert right.lessons == ["Answered with convert in 1 step."]


# -- the generator sees recent reflections ----------------------------------------------
async def store_episode(stack: Stack, user: str, goal: str, task_type: str, lesson: str) -> None:
    topics = stack.topics["episode-memory"]
    client: RequestResponseClient[EpisodeRequest, EpisodeResponse] = RequestResponseClient(
        stack.transport, topics["request"], topics["response"], EpisodeResponse
    )
    await client.start()
    try:
        reply = await client.request(
            EpisodeRequest(
                operation="store",
                user=user,
                goal=goal,
                outcome="success",
                lessons=[lesson],
                task_type=task_type,
                session_id=goal,
            ),
            timeout=30,
        )
        assert reply.error is None, reply.error
    finally:
        await client.close()


@pytest.mark.broker
@pytest.mark.parametrize("top_k", [2, 0])
async def test_recent_lessons_of_the_owners_task_type_reach_the_prompt_fenced(
    transport: PulsarTransport, tmp_path: Path, unique: str, top_k: int
) -> None:
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=lambda r: "Thought: easy\nFinal Answer: 25 C",
        services=("episode-memory",),
        agent_mem={
            "episode-retrieval-top-k": 1,
            "episode-min-score": -1,
            "reflection-top-k": top_k,
        },
    ) as stack:
        for user, goal, task_type, lesson in [
            ("ada", "Convert 98 F to C", "temperature", "Subtract 32 before scaling by 5/9."),
            ("ada", "Convert 50 F to C", "temperature", "State the unit in the final answer."),
            ("ada", "Convert 10 miles to km", "distance", "Multiply miles by 1.609 always."),
            ("bob", "Convert 70 F to C", "temperature", "Bob keeps his thermostat at 70."),
        ]:
            await store_episode(stack, user, goal, task_type, lesson)
        await stack.ask("What is 77 F in Celsius?", user="ada", task_type="temperature")
        [text] = stack.prompts()
    memory = text.split("<memory>\n", 1)[1].split("</memory>", 1)[0]
    episodes = [line for line in memory.splitlines() if line.startswith("- Episode")]
    recent = [line for line in memory.splitlines() if line.startswith("- Recent lesson")]
    assert len(episodes) == 1  # the one most relevant, as before
    if top_k == 0:
        assert recent == []
        return
    # The other temperature episode of ada's; not her distance one, never bob's.
    [line] = recent
    assert line.startswith("- Recent lesson (success): ")
    lessons = {"Subtract 32 before scaling by 5/9.", "State the unit in the final answer."}
    assert {line.split(": ", 1)[1], episodes[0].split("Lessons: ")[1]} == lessons
    assert "thermostat" not in text and "1.609" not in text


def test_lessons_name_the_task_type_so_those_of_different_types_stay_apart() -> None:
    right = trajectory(answer="8.05 km", task_type="Unit Conversion!")
    [lesson] = heuristic_reflection(right).lessons
    assert (
        lesson.content == "For unit conversion tasks, using convert gave a good answer in 1 step."
    )
    [untyped] = heuristic_reflection(right.model_copy(update={"task_type": ""})).lessons
    assert untyped.content.startswith("For how questions, using convert")
