"""ACE learning over the real broker: the memory learner reflects on trajectories and
feedback and curates deltas into the real playbook-memory service (a scripted LLM where the
LLM reflector or curator is on)."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.learner.service import MemoryLearnerProcessor
from react_mem.learner.settings import LearnerSettings
from react_mem.schema import AgentStep, TextCompletionRequest
from react_mem.schema.agent import MemoryRef
from react_mem.schema.playbook import (
    Bullet,
    Delta,
    DeltaOperation,
    DeltaRecord,
    Feedback,
    PlaybookRequest,
    PlaybookResponse,
    RubricResult,
)
from react_mem.schema.trajectory import Trajectory
from tests.support.memory_services import MovableClock, Running, serving, topics
from tests.support.recording import eventually
from tests.support.scripted_llm import Reply, ScriptedLLM, start_scripted_llm

pytestmark = pytest.mark.broker

FAMILY = "Look up family members in the knowledge base."
BRIEF = "Answer in one short sentence."
QUESTION = "Where does my sister Maria live?"


def asked_for(request: TextCompletionRequest) -> set[str]:
    return set((request.schema_ or {}).get("properties", {}))


def junk(request: TextCompletionRequest) -> Reply:
    return "I am not sure what you want."


@dataclass
class Ace:
    transport: PulsarTransport
    tmp_path: Path
    unique: str
    llm: ScriptedLLM
    llm_topics: dict[str, str]
    playbook: Running[Any, Any, Any]
    learner: MemoryLearnerProcessor | None = None
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    starts: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def pid(self) -> str:
        return f"learner-{self.unique}"

    @property
    def learner_topics(self) -> dict[str, str]:
        u = self.unique
        found = {
            "trajectory": f"flow:tg:agent-trajectory-{u}:default:f1",
            "feedback": f"flow:tg:agent-feedback-{u}:default:f1",
            "conversation-ended": f"flow:tg:conversation-ended-{u}:default:f1",
            "text-completion-request": self.llm_topics["request"],
            "text-completion-response": self.llm_topics["response"],
        }
        # Not running: these trajectories ask for no facts, episodes or summaries.
        for name in ("fact-memory", "episode-memory", "conversation-memory"):
            found |= {f"{name}-{k}": v for k, v in topics(name, u, "default").items()}
        playbook = topics("playbook-memory", u, "default")
        found |= {f"playbook-memory-{k}": v for k, v in playbook.items()}
        return found

    async def start_learner(self, *, fresh_ledger: bool = False, **settings: Any) -> None:
        path = self.tmp_path / f"flows-{self.pid}.yaml"
        definition = {"default": {f"processor:{self.pid}": {"f1": {"topics": self.learner_topics}}}}
        path.write_text(json.dumps(definition))
        state = self.tmp_path / (f"state-{next(self.starts)}" if fresh_ledger else "state")
        values = {
            "id": self.pid,
            "flows": path,
            "state_dir": state,
            "llm_timeout": 5.0,
            "memory_timeout": 20.0,
            "retry_delay": 0.05,
        }
        self.registry = CollectorRegistry()
        loaded = LearnerSettings.load(values | settings)
        learner = MemoryLearnerProcessor(loaded, self.transport, registry=self.registry)
        await learner.start()
        self.learner = learner

    async def stop_learner(self) -> None:
        if self.learner is not None:
            await self.learner.stop()
            self.learner = None

    async def publish(self, message: Trajectory | Feedback, spec: str) -> None:
        producer = await self.transport.producer(Queue.parse(self.learner_topics[spec]))
        try:
            await producer.send(message.encode(), {"id": "t"})
        finally:
            await producer.close()

    async def learn(self, message: Trajectory | Feedback, count: int, status: str = "ok") -> None:
        """Publish and wait until the learner has settled ``count`` messages of its kind."""
        spec = "trajectory" if isinstance(message, Trajectory) else "feedback"
        await self.publish(message, spec)
        await self.settled(spec, count, status)

    def sample(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, {"processor": self.pid, **labels})
        return value or 0.0

    async def settled(self, spec: str, count: int, status: str = "ok") -> None:
        consumer = self.learner_topics[spec]
        name = "tg_consumer_processing_total"
        await eventually(
            lambda: self.sample(name, consumer=consumer, status=status) >= count, timeout=60
        )

    # -- the playbook ------------------------------------------------------------------------
    async def ask(self, **fields: Any) -> PlaybookResponse:
        response: PlaybookResponse = await self.playbook.ask(PlaybookRequest(**fields))
        assert response.error is None, response.error
        return response

    async def seed(self, *contents: str) -> list[MemoryRef]:
        """Bullets written as a client would; returned as the agent records them."""
        ops = [DeltaOperation(type="ADD", content=c, section="strategies") for c in contents]
        await self.ask(operation="apply-delta", delta=Delta(delta_id="seed", operations=ops))
        found = await self.bullets()
        return [MemoryRef(kind="bullet", id=found[c].id, content=c) for c in contents]

    async def bullets(self, context: str = "", user: str | None = "alice") -> dict[str, Bullet]:
        """What ``user`` reads: the collection-wide bullets and their own private ones."""
        response = await self.ask(operation="list", limit=1000, context_scope_id=context, user=user)
        return {b.content: b for b in response.bullets}

    async def history(self, user: str | None = "alice") -> list[DeltaRecord]:
        """The history of ``user``'s own playbook (None: the collection-wide one)."""
        return list((await self.ask(operation="history", limit=100, user=user)).history)


@pytest.fixture
async def ace(transport: PulsarTransport, tmp_path: Path, unique: str) -> AsyncIterator[Ace]:
    async with contextlib.AsyncExitStack() as exits:
        llm, llm_topics = await start_scripted_llm(transport, tmp_path, unique, script=junk)
        exits.push_async_callback(llm.stop)
        playbook = await exits.enter_async_context(
            serving(
                PlaybookMemoryProcessor,
                PlaybookResponse,
                transport,
                pid=f"playbook-{unique}",
                queues={"default": topics("playbook-memory", unique, "default")},
                data_dir=tmp_path / "playbook",
                registry=CollectorRegistry(),
                clock=MovableClock(),
                retry_delay=0.01,
                seed_bullets=None,  # these tests count the bullets the learner writes
                harmful_margin=0,  # and read its tags (auto-pruning: test_ace_playbook_units)
            )
        )
        running = Ace(transport, tmp_path, unique, llm, llm_topics, playbook)
        exits.push_async_callback(running.stop_learner)
        yield running


def trajectory(session: str, used: list[MemoryRef], **fields: Any) -> Trajectory:
    values: dict[str, Any] = {
        "trajectory_id": session,
        "session_id": session,
        "user": "alice",
        "question": QUESTION,
        "answer": "Maria lives in Lisbon.",
        "steps": [
            AgentStep(
                thought="Look her up.",
                action="knowledge-query",
                arguments={"question": "Where does Maria live?"},
                observation="Maria lives in Lisbon.",
            )
        ],
        "memory_used": used,
        "extract_facts": False,
        "record_episode": False,
    }
    return Trajectory(**(values | fields))


def counts(b: Bullet) -> tuple[int, int, int]:
    return b.helpful, b.harmful, b.neutral


def lesson_bullets(found: dict[str, Bullet]) -> list[Bullet]:
    return [b for c, b in found.items() if c not in (FAMILY, BRIEF)]


# -- trajectories --------------------------------------------------------------------------
async def test_a_success_tags_the_bullets_used_helpful_and_adds_a_lesson(ace: Ace) -> None:
    used = await ace.seed(FAMILY, BRIEF)
    await ace.start_learner()
    await ace.learn(trajectory("s1", used), 1)

    found = await ace.bullets()
    assert counts(found[FAMILY]) == (1, 0, 0) and counts(found[BRIEF]) == (1, 0, 0)
    [lesson] = lesson_bullets(found)
    assert "knowledge-query" in lesson.content and lesson.section == "strategies"
    assert lesson.user == "alice" and lesson.memory_type == "procedural"
    assert lesson.helpful == 1 and lesson.metadata["learned-from"] == "trajectory:s1"
    # The lesson is alice's (her private playbook); the tags went where the bullets are.
    [record] = await ace.history()
    assert record.delta_id == "trajectory:s1" and record.source == "trajectory:s1"
    assert record.user == "alice" and [o.type for o in record.operations] == ["ADD"]
    assert lesson.content not in await ace.bullets(user="bob")
    tags, _seed = await ace.history(user=None)
    assert tags.delta_id == "trajectory:s1:tag" and {o.type for o in tags.operations} == {"TAG"}
    assert ace.sample("tg_memory_learned_total", kind="delta") == 1
    assert ace.sample("tg_memory_learned_total", kind="bullet") == 1
    assert ace.llm.requests == []  # heuristic reflector and curator


async def test_a_failure_tags_the_bullets_used_harmful(ace: Ace) -> None:
    used = await ace.seed(FAMILY, BRIEF)
    await ace.start_learner()
    error = "No final answer within max-iterations (5); the last step was: none"
    await ace.learn(trajectory("s1", used, outcome="failure", answer="", error=error), 1)

    found = await ace.bullets()
    assert counts(found[FAMILY]) == (0, 1, 0) and counts(found[BRIEF]) == (0, 1, 0)
    [lesson] = lesson_bullets(found)
    assert "max-iterations (5)" in lesson.content and lesson.section == "pitfalls"


async def test_the_llm_reflectors_lessons_land_in_the_trajectorys_context_scope(
    ace: Ace,
) -> None:
    reflection = {
        "key_insight": "Family questions are answered from the knowledge base.",
        "lessons": [
            {"content": "Ask the knowledge base about relatives first.", "type": "tool"},
        ],
        "bullet_tags": [],
    }
    ace.llm.script = lambda r: json.dumps(reflection) if "bullet_tags" in asked_for(r) else None
    await ace.start_learner(reflector="llm")
    await ace.learn(trajectory("s1", [], context_scope_id="board-games"), 1)

    assert await ace.bullets() == {}  # the default context has nothing
    [lesson] = (await ace.bullets("board-games")).values()
    assert lesson.content == "Ask the knowledge base about relatives first."
    assert lesson.context_scope_id == "board-games" and lesson.section == "tool use"
    [request] = ace.llm.requests
    assert request.response_format == "json" and QUESTION in request.prompt
    assert ace.sample("tg_memory_learner_ace_total", role="reflector", how="llm") == 1


async def test_duplicate_lessons_reinforce_instead_of_cloning(ace: Ace) -> None:
    await ace.start_learner()
    await ace.learn(trajectory("s1", []), 1)
    [lesson] = (await ace.bullets()).values()

    # The same lesson again, the bullet not in the prompt: the service reinforces the ADD.
    await ace.learn(trajectory("s2", []), 2)
    [again] = (await ace.bullets()).values()
    assert again.id == lesson.id and again.helpful == 2

    # In the prompt: the curator tags it (helpful, and reinforced) and adds nothing.
    ref = MemoryRef(kind="bullet", id=lesson.id, content=lesson.content)
    await ace.learn(trajectory("s3", [ref]), 3)
    [third] = (await ace.bullets()).values()
    assert third.id == lesson.id and third.helpful == 4
    latest = (await ace.history())[0]
    assert [(o.type, o.bullet_id, o.helpful) for o in latest.operations] == [("TAG", lesson.id, 2)]


async def test_a_redelivered_trajectory_applies_its_delta_once(ace: Ace) -> None:
    used = await ace.seed(FAMILY)
    await ace.start_learner()
    t = trajectory("s1", used)
    await ace.learn(t, 1)
    await ace.learn(t, 2)  # the ledger knows it: nothing asked, nothing sent
    assert ace.sample("tg_memory_learner_duplicates_total", kind="trajectory") == 1

    # A learner that lost its ledger sends the same delta id: the service applies it once.
    await ace.stop_learner()
    await ace.start_learner(fresh_ledger=True)
    await ace.learn(t, 1)
    assert ace.sample("tg_memory_learner_duplicates_total", kind="delta") == 1
    found = await ace.bullets()
    assert counts(found[FAMILY]) == (1, 0, 0) and len(found) == 2
    assert [r.delta_id for r in await ace.history()] == ["trajectory:s1"]
    assert [r.delta_id for r in await ace.history(user=None)] == ["trajectory:s1:tag", "seed"]


# -- feedback ---------------------------------------------------------------------------------
async def test_feedback_moves_the_counters_of_the_bullets_in_the_prompt(ace: Ace) -> None:
    used = await ace.seed(FAMILY, BRIEF)
    await ace.start_learner()
    await ace.learn(trajectory("s1", used), 1)
    assert counts((await ace.bullets())[FAMILY]) == (1, 0, 0)

    bad = Feedback(
        feedback_id="f1", session_id="s1", user="alice", rating=-1.0, comment="Wrong city."
    )
    await ace.learn(bad, 1)
    found = await ace.bullets()
    assert counts(found[FAMILY]) == (1, 1, 0) and counts(found[BRIEF]) == (1, 1, 0)
    assert not [c for c in found if "Wrong city." in c]  # the user's words stay out
    [comment] = [b for c, b in found.items() if c.startswith("A user objected")]
    assert comment.section == "pitfalls"
    assert (await ace.history())[0].delta_id == "feedback:f1"

    await ace.learn(bad, 2)  # re-sent: applied once
    good = Feedback(session_id="s1", user="alice", helpful=True)  # no id: its content identifies it
    await ace.learn(good, 3)
    await ace.learn(good, 4)
    found = await ace.bullets()
    assert counts(found[FAMILY]) == (2, 1, 0) and counts(found[BRIEF]) == (2, 1, 0)
    assert ace.sample("tg_memory_learner_feedback_total", result="learned") == 2
    assert ace.sample("tg_memory_learner_feedback_total", result="duplicate") == 2


async def test_rubric_results_reach_the_llm_reflector_and_its_lessons_are_kept(
    ace: Ace,
) -> None:
    used = await ace.seed(FAMILY)
    reflection = {
        "key_insight": "The district was required.",
        "lessons": [{"content": "Name the district as well as the city.", "type": "failure"}],
        "bullet_tags": [{"id": used[0].id, "tag": "helpful"}],  # the user disagrees
    }
    ace.llm.script = lambda r: json.dumps(reflection) if "bullet_tags" in asked_for(r) else None
    await ace.start_learner(reflector="llm")
    await ace.learn(trajectory("s1", used), 1)
    feedback = Feedback(
        feedback_id="f1",
        session_id="s1",
        user="alice",
        rubric=[
            RubricResult(name="names the district", passed=False, comment="Alfama missing"),
            RubricResult(name="one sentence", passed=True),
        ],
    )
    await ace.learn(feedback, 1)

    prompt = ace.llm.requests[-1].prompt
    assert "FAIL: names the district (Alfama missing)\nPASS: one sentence" in prompt
    found = await ace.bullets()
    # helpful from the trajectory (the LLM said so), harmful from the failed rubric.
    assert counts(found[FAMILY]) == (1, 1, 0)
    assert found["Name the district as well as the city."].helpful == 2  # learned twice


async def test_feedback_on_an_unknown_session_is_settled_and_counted(ace: Ace) -> None:
    used = await ace.seed(FAMILY)
    await ace.start_learner(feedback_wait_redeliveries=1)
    # Waited for once (the trajectory may be on its way), then settled as an error.
    await ace.learn(Feedback(feedback_id="f0", session_id="nobody", rating=1.0), 2, "error")
    assert ace.sample("tg_memory_learner_feedback_total", result="unknown-session") == 1
    consumer = ace.learner_topics["feedback"]
    assert ace.sample("tg_consumer_redelivery_total", consumer=consumer) == 1

    # The consumer goes on: feedback on a known session is learned.
    await ace.learn(trajectory("s1", used), 1)
    await ace.learn(Feedback(feedback_id="f1", session_id="s1", user="alice", rating=1.0), 1)
    assert counts((await ace.bullets())[FAMILY]) == (2, 0, 0)


async def test_feedback_on_another_owners_session_is_an_unknown_session(ace: Ace) -> None:
    used = await ace.seed(FAMILY)
    await ace.start_learner(feedback_wait_redeliveries=0)
    await ace.learn(trajectory("s1", used), 1)  # alice's session
    # Without a user, or as anyone else, alice's session id names nothing.
    for n, user in enumerate((None, "", "bob", "Alice"), start=1):
        feedback = Feedback(feedback_id=f"f{n}", session_id="s1", user=user, rating=-1.0)
        await ace.learn(feedback, n, "error")
    assert ace.sample("tg_memory_learner_feedback_total", result="unknown-session") == 4
    assert counts((await ace.bullets())[FAMILY]) == (1, 0, 0)


# -- the LLM curator and the reflection window -----------------------------------------------
async def test_junk_from_the_llm_curator_falls_back_with_no_lesson_lost(ace: Ace) -> None:
    used = await ace.seed(FAMILY)
    await ace.start_learner(curator="llm", llm_attempts=2)
    await ace.learn(trajectory("s1", used), 1)

    assert len([r for r in ace.llm.requests if "operations" in asked_for(r)]) == 2  # retried
    found = await ace.bullets()
    [lesson] = lesson_bullets(found)
    assert "knowledge-query" in lesson.content and counts(found[FAMILY]) == (1, 0, 0)
    assert ace.sample("tg_memory_learner_ace_total", role="curator", how="heuristic-fallback") == 1


async def test_the_reflection_window_holds_the_last_three(ace: Ace) -> None:
    n = itertools.count(1)

    def reflect(request: TextCompletionRequest) -> Reply:
        if "bullet_tags" not in asked_for(request):
            return None
        return json.dumps({"key_insight": f"insight-{next(n)}", "lessons": [], "bullet_tags": []})

    ace.llm.script = reflect
    await ace.start_learner(reflector="llm")
    for s in range(5):
        await ace.learn(trajectory(f"s{s}", []), s + 1)
    await ace.learn(trajectory("elsewhere", [], context_scope_id="other"), 6)

    prompts = [r.prompt for r in ace.llm.requests]
    windows = [[int(x) for x in re.findall(r"insight-(\d+)", p)] for p in prompts]
    assert windows == [[], [1], [1, 2], [1, 2, 3], [2, 3, 4], []]
    assert "Recent reflections on this context (oldest first):\n1. Question:" in prompts[4]
