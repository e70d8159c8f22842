"""The memory learner over the real broker, the real memory services and a scripted LLM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.learner.records import invocation_summary
from react_mem.learner.service import MemoryLearnerProcessor
from react_mem.learner.settings import LearnerSettings
from react_mem.schema import AgentStep, TextCompletionRequest
from react_mem.schema.conversations import (
    Conversation,
    ConversationEnded,
    ConversationRequest,
    ConversationResponse,
    ConversationTurn,
)
from react_mem.schema.episodes import Episode, EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import Fact, FactInput, FactRequest, FactResponse
from react_mem.schema.forget import MEMORY_FORGET, ForgetRequest, ForgetResponse
from react_mem.schema.trajectory import Trajectory
from tests.support.memory_services import MovableClock, Running, serving, topics
from tests.support.recording import eventually
from tests.support.scripted_llm import Reply, ScriptedLLM, silent, start_scripted_llm

pytestmark = pytest.mark.broker

QUESTION = "Where does my sister Maria live? I want to plan a visit."
ANSWER = "Your sister Maria lives in Lisbon, in the Alfama district."
FACTS = [
    "Maria, the user's sister, lives in Lisbon.",
    "Where does my sister Maria live?",  # restates the question
    "The user asked where Maria lives.",  # about the exchange, not the world
    "Maria lives in the Alfama district of Lisbon.",
]
SUMMARY = "The user asked where their sister Maria lives; she lives in Lisbon (Alfama)."
LESSONS = ["Look up family members in the knowledge base before answering."]


def answers(
    facts: Any = None, summary: Any = None, lessons: Any = None, junk: str | None = None
) -> Any:
    """A script answering each extraction prompt by the JSON Schema it asks for."""

    def reply(request: TextCompletionRequest) -> Reply:
        asked = (request.schema_ or {}).get("properties", {})
        if junk is not None:
            return junk
        if "facts" in asked:
            return json.dumps({"facts": FACTS if facts is None else facts})
        if "summary" in asked:
            return json.dumps({"summary": SUMMARY if summary is None else summary})
        if "lessons" in asked:
            return json.dumps({"lessons": LESSONS if lessons is None else lessons})
        return None

    return reply


def trajectory(session: str = "s1", conversation: str = "c1", **fields: Any) -> Trajectory:
    values: dict[str, Any] = {
        "trajectory_id": session,
        "session_id": session,
        "conversation_id": conversation,
        "user": "alice",
        "question": QUESTION,
        "answer": ANSWER,
        "steps": [
            AgentStep(
                thought="Look her up.",
                action="knowledge-query",
                arguments={"question": "Where does Maria live?"},
                observation="Maria has lived in the Alfama district of Lisbon since 2019.",
            )
        ],
        "iterations": 2,
        "in_tokens": 120,
        "out_tokens": 30,
        "duration_seconds": 1.5,
    }
    return Trajectory(**(values | fields))


@dataclass
class Stack:
    """The memory services, a scripted LLM and the learner's queues, for one test."""

    transport: PulsarTransport
    tmp_path: Path
    unique: str
    llm: ScriptedLLM
    llm_topics: dict[str, str]
    exits: contextlib.AsyncExitStack
    services: dict[str, Running[Any, Any, Any]] = field(default_factory=dict)
    learner: MemoryLearnerProcessor | None = None
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    service_registries: dict[str, CollectorRegistry] = field(default_factory=dict)

    @property
    def pid(self) -> str:
        return f"learner-{self.unique}"

    def queues(self, name: str) -> dict[str, str]:
        extra = ("ended",) if name == "conversation-memory" else ()
        return topics(name, self.unique, "default", extra)

    @property
    def learner_topics(self) -> dict[str, str]:
        found = {
            "trajectory": f"flow:tg:agent-trajectory-{self.unique}:default:f1",
            "conversation-ended": self.queues("conversation-memory")["ended"],
            "text-completion-request": self.llm_topics["request"],
            "text-completion-response": self.llm_topics["response"],
            MEMORY_FORGET: f"flow:tg:{MEMORY_FORGET}-{self.unique}:default:f1",
            f"{MEMORY_FORGET}-response": f"response:tg:{MEMORY_FORGET}-{self.unique}:default:f1",
        }
        for name in ("fact-memory", "episode-memory", "conversation-memory"):
            found[f"{name}-request"] = self.queues(name)["request"]
            found[f"{name}-response"] = self.queues(name)["response"]
        return found

    async def start_service(self, name: str, **settings: Any) -> None:
        cls, response = {
            "fact-memory": (FactMemoryProcessor, FactResponse),
            "episode-memory": (EpisodeMemoryProcessor, EpisodeResponse),
            "conversation-memory": (ConversationMemoryProcessor, ConversationResponse),
        }[name]
        self.services[name] = await self.exits.enter_async_context(
            serving(
                cls,  # type: ignore[arg-type]
                response,
                self.transport,
                pid=f"{name}-{self.unique}",
                queues={"default": self.queues(name)},
                data_dir=self.tmp_path / name,
                registry=self.service_registries.setdefault(name, CollectorRegistry()),
                clock=MovableClock(),
                **({"retry_delay": 0.01} | settings),
            )
        )

    async def start_learner(
        self, agent_mem: dict[str, str] | None = None, **settings: Any
    ) -> MemoryLearnerProcessor:
        definition: dict[str, Any] = {
            "default": {f"processor:{self.pid}": {"f1": {"topics": self.learner_topics}}}
        }
        if agent_mem is not None:
            definition["default"]["agent-mem"] = agent_mem
        path = self.tmp_path / f"flows-{self.pid}.yaml"
        path.write_text(json.dumps(definition))
        values = {
            "id": self.pid,
            "flows": path,
            "state_dir": self.tmp_path / "state",
            "llm_timeout": 5.0,
            "memory_timeout": 10.0,
            "retry_delay": 0.05,
        }
        loaded = LearnerSettings.load(values | settings)
        self.registry = CollectorRegistry()
        learner = MemoryLearnerProcessor(loaded, self.transport, registry=self.registry)
        await learner.start()
        self.learner = learner
        return learner

    async def stop_learner(self) -> None:
        if self.learner is not None:
            await self.learner.stop()
            self.learner = None

    async def publish(self, message: Trajectory | ConversationEnded | bytes, spec: str) -> None:
        producer = await self.transport.producer(Queue.parse(self.learner_topics[spec]))
        try:
            data = message if isinstance(message, bytes) else message.encode()
            await producer.send(data, {"id": "t"})
        finally:
            await producer.close()

    # -- reading the outcome ---------------------------------------------------------
    def sample(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, {"processor": self.pid, **labels})
        return value or 0.0

    def processed(self, spec: str, status: str = "ok") -> float:
        consumer = self.learner_topics[spec]
        return self.sample("tg_consumer_processing_total", consumer=consumer, status=status)

    async def settled(self, spec: str, count: int = 1, status: str = "ok") -> None:
        await eventually(lambda: self.processed(spec, status) >= count, timeout=60)

    async def ask(self, name: str, request: Any) -> Any:
        response = await self.services[name].ask(request)
        assert response.error is None, response.error
        return response

    async def facts(self, user: str | None = "alice") -> list[Fact]:
        request = FactRequest(operation="list", user=user, limit=1000)
        return list((await self.ask("fact-memory", request)).facts)

    async def episodes(self) -> list[Episode]:
        request = EpisodeRequest(operation="list", user="alice", limit=100)
        return list((await self.ask("episode-memory", request)).episodes)

    async def conversation(self, conversation: str = "c1") -> Conversation:
        request = ConversationRequest(operation="get", user="alice", conversation_id=conversation)
        found = (await self.ask("conversation-memory", request)).conversation
        assert found is not None
        return found

    async def append_turn(self, t: Trajectory) -> None:
        """What the agent does before it publishes the trajectory."""
        request = ConversationRequest(
            operation="append",
            user=t.user,
            conversation_id=t.conversation_id,
            turn_id=t.session_id,
            query=t.question,
            answer=t.answer,
            summary=invocation_summary(t),
            result=t.outcome,
        )
        await self.ask("conversation-memory", request)

    def llm_asked(self, key: str) -> list[TextCompletionRequest]:
        return [r for r in self.llm.requests if key in (r.schema_ or {}).get("properties", {})]


@pytest.fixture
async def stack(transport: PulsarTransport, tmp_path: Path, unique: str) -> AsyncIterator[Stack]:
    async with contextlib.AsyncExitStack() as exits:
        llm, llm_topics = await start_scripted_llm(transport, tmp_path, unique, script=answers())
        exits.push_async_callback(llm.stop)
        running = Stack(transport, tmp_path, unique, llm, llm_topics, exits)
        exits.push_async_callback(running.stop_learner)
        for name in ("conversation-memory", "episode-memory"):
            await running.start_service(name)
        yield running


async def test_a_trajectory_yields_the_summary_the_facts_and_the_episode(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    await stack.start_learner()
    t = trajectory()
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory")

    assert (await stack.conversation()).summary == SUMMARY
    facts = await stack.facts()
    assert sorted(f.content for f in facts) == [
        "Maria lives in the Alfama district of Lisbon.",
        "Maria, the user's sister, lives in Lisbon.",
    ]
    assert {f.source_conversation for f in facts} == {"c1"}
    assert {f.user for f in facts} == {"alice"}
    assert await stack.facts(user="bob") == []  # stored in alice's scope only

    [episode] = await stack.episodes()
    assert episode.goal == QUESTION and episode.outcome == "success"
    assert episode.session_id == "s1" and episode.conversation_id == "c1"
    assert episode.lessons == LESSONS
    assert episode.tokens == 150 and episode.duration_seconds == 1.5
    assert [s.action for s in episode.steps] == ["knowledge-query"]

    # One JSON-constrained question each; the record is delimited as data.
    for key in ("summary", "facts", "lessons"):
        [request] = stack.llm_asked(key)
        assert request.response_format == "json" and request.schema_ is not None
        assert "<record>" in request.prompt and QUESTION in request.prompt
    for kind, count in (("fact", 2), ("episode", 1), ("summary", 1)):
        assert stack.sample("tg_memory_learned_total", kind=kind) == count


async def test_a_trajectory_published_twice_is_learned_once(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    await stack.start_learner()
    t = trajectory()
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory", 2)

    assert len(await stack.facts()) == 2
    assert len(await stack.episodes()) == 1
    assert (await stack.conversation()).summary == SUMMARY
    assert len(stack.llm.requests) == 3  # the second delivery asked nothing
    assert stack.sample("tg_memory_learner_duplicates_total", kind="trajectory") == 1
    assert stack.sample("tg_memory_learned_total", kind="summary") == 1


async def test_work_from_before_a_forget_is_not_learned_after_it(stack: Stack) -> None:
    """A trajectory about alice from before her forget, delivered after it (queued behind
    it, or redelivered), learns nothing; what she says after the forget is learned."""
    await stack.start_service("fact-memory")
    await stack.start_learner()
    before = trajectory("s-old", "c-old", finished_at=time.time() - 60)
    topics = stack.learner_topics
    client = RequestResponseClient(
        stack.transport,
        topics[MEMORY_FORGET],
        topics[f"{MEMORY_FORGET}-response"],
        ForgetResponse,
        subscriber=f"forget-{stack.unique}",
    )
    await client.start()
    try:
        reply = await client.request(ForgetRequest(user="alice"), timeout=30)
    finally:
        await client.close()
    assert reply.error is None and reply.forgotten is not None

    await stack.publish(before, "trajectory")
    await stack.settled("trajectory")
    assert await stack.facts() == [] and await stack.episodes() == []
    assert stack.llm.requests == []  # not even planned
    forgotten = {"kind": "trajectory", "outcome": "forgotten"}
    assert stack.sample("tg_memory_learner_records_total", **forgotten) == 1

    after = trajectory("s-new", "c-new", finished_at=time.time())  # after the forget
    await stack.append_turn(after)
    await stack.publish(after, "trajectory")
    await stack.settled("trajectory", 2)
    assert len(await stack.facts()) == 2
    assert stack.sample("tg_memory_learner_records_total", **forgotten) == 1


async def test_an_explicit_request_to_remember_is_kept_once_beside_the_llms_facts(
    stack: Stack,
) -> None:
    await stack.start_service("fact-memory")
    # The LLM repeats the explicit fact in other words and case, adds one a tool told it,
    # and one nobody said (dropped, counted).
    stack.llm.script = answers(
        facts=[
            "the user is allergic to peanuts",
            "Maria lives in the Alfama district of Lisbon.",
            "Ada lives in Leeds.",
        ]
    )
    await stack.start_learner()
    t = trajectory(question="Hi, I'm Ada. Please remember that I am allergic to peanuts.")
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory", 2)

    facts = {f.content: f for f in await stack.facts()}
    assert sorted(facts) == [
        "Maria lives in the Alfama district of Lisbon.",
        "The user is allergic to peanuts.",
        "The user's name is Ada.",
    ]
    assert facts["The user is allergic to peanuts."].importance == 0.8
    assert facts["The user is allergic to peanuts."].metadata["extracted-by"] == "explicit-request"
    assert facts["Maria lives in the Alfama district of Lisbon."].metadata["extracted-by"] == "llm"
    assert stack.sample("tg_memory_learned_total", kind="fact") == 3
    assert stack.sample("tg_memory_learner_ungrounded_total", kind="fact") == 1
    assert stack.sample("tg_memory_learner_duplicates_total", kind="fact") == 0


async def test_a_failure_mid_way_then_a_restart_writes_each_memory_once(stack: Stack) -> None:
    # fact-memory is not running: the summary is written, the facts time out.
    await stack.start_learner(memory_timeout=1.0, max_redeliveries=100)
    t = trajectory()
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await eventually(
        lambda: (
            stack.sample(
                "tg_consumer_redelivery_total", consumer=stack.learner_topics["trajectory"]
            )
            >= 1
        ),
        timeout=30,
    )
    assert (await stack.conversation()).summary == SUMMARY
    assert len(await stack.episodes()) == 1  # written beside the facts, which timed out
    asked = len(stack.llm.requests)
    assert asked == 3

    # A new learner process (same ledger) with an LLM that would now say other things.
    await stack.stop_learner()
    stack.llm.script = answers(facts=["Maria moved to Porto last year."], summary="Other.")
    await stack.start_service("fact-memory")
    await stack.start_learner()
    await stack.settled("trajectory")

    assert sorted(f.content for f in await stack.facts()) == [
        "Maria lives in the Alfama district of Lisbon.",
        "Maria, the user's sister, lives in Lisbon.",
    ]
    assert len(await stack.episodes()) == 1
    assert (await stack.conversation()).summary == SUMMARY
    assert len(stack.llm.requests) == asked  # the saved plan was reused
    assert stack.sample("tg_memory_learned_total", kind="summary") == 0  # done before
    assert stack.sample("tg_memory_learned_total", kind="fact") == 2

    await stack.publish(t, "trajectory")  # and once more, after it is done
    await stack.settled("trajectory", 2)
    assert len(await stack.facts()) == 2 and len(await stack.episodes()) == 1


async def test_extract_facts_and_record_episode_are_honoured(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    await stack.start_learner()
    quiet = trajectory("s1", extract_facts=False, record_episode=False)
    await stack.append_turn(quiet)
    await stack.publish(quiet, "trajectory")
    await stack.settled("trajectory")
    assert (await stack.conversation()).summary == SUMMARY
    assert await stack.facts() == [] and await stack.episodes() == []
    assert len(stack.llm_asked("summary")) == 1 and len(stack.llm.requests) == 1

    # No tools, one step, success: facts, but not an episode.
    # (The facts are grounded in the question: no tool said anything.)
    asked = "Where does my sister Maria live: in which district of Lisbon, Alfama?"
    chat = trajectory(
        "s2", conversation="c2", question=asked, steps=[AgentStep(thought="I know this.")]
    )
    await stack.append_turn(chat)
    await stack.publish(chat, "trajectory")
    await stack.settled("trajectory", 2)
    assert len(await stack.facts()) == 2 and await stack.episodes() == []

    # A failure is worth an episode even without tools.
    failed = trajectory(
        "s3", conversation="c3", steps=[], answer="", outcome="failure", error="LLM timed out"
    )
    await stack.append_turn(failed)
    await stack.publish(failed, "trajectory")
    await stack.settled("trajectory", 3)
    [episode] = await stack.episodes()
    assert episode.outcome == "failure" and episode.score == 0.0 and episode.session_id == "s3"


async def test_junk_from_the_llm_yields_no_facts_and_deterministic_fallbacks(
    stack: Stack,
) -> None:
    await stack.start_service("fact-memory")
    stack.llm.script = answers(junk='Sure! Here are the facts: {"facts": "Maria"} hope it helps')
    await stack.start_learner()
    t = trajectory()
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory")

    assert await stack.facts() == []
    assert (await stack.conversation()).summary == invocation_summary(t)
    [episode] = await stack.episodes()
    assert episode.lessons == ["Answered with knowledge-query in 1 step."]
    assert len(stack.llm.requests) == 6  # two attempts at each of three questions


async def test_an_unavailable_llm_delays_learning_then_learns_without_it(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    stack.llm.script = silent
    await stack.start_learner(llm_timeout=0.5, llm_attempts=1, llm_outage_redeliveries=1)
    t = trajectory(question=QUESTION + " Please remember that I'm visiting her in May.")
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory")

    assert (
        stack.sample("tg_consumer_redelivery_total", consumer=stack.learner_topics["trajectory"])
        == 1
    )
    assert stack.sample("tg_memory_learner_degraded_total") == 1
    assert (await stack.conversation()).summary == invocation_summary(t)
    # Only what the user asked to be remembered: no LLM was needed for it.
    assert [f.content for f in await stack.facts()] == ["The user is visiting her in May."]
    assert len(await stack.episodes()) == 1


async def test_the_last_delivery_learns_without_the_llm_whatever_the_outage_setting(
    stack: Stack,
) -> None:
    await stack.start_service("fact-memory")
    stack.llm.script = silent
    await stack.start_learner(
        llm_timeout=0.3, llm_attempts=1, llm_outage_redeliveries=10, max_redeliveries=1
    )
    t = trajectory(question="Please remember that I am allergic to peanuts.")
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory")  # on the second, last delivery: not dead-lettered
    assert stack.sample("tg_memory_learner_degraded_total") == 1
    assert [f.content for f in await stack.facts()] == ["The user is allergic to peanuts."]


def lunch(n: int) -> str:
    """A turn of the conversation: what its facts are made of."""
    return f"Question {n} about lunch plans: I'm Alice, I live in Leeds, with a peanut allergy."


async def test_a_conversation_end_promotes_facts_once_even_if_redelivered(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    stack.llm.script = answers(facts=["Alice is allergic to peanuts.", "Alice lives in Leeds."])
    await stack.start_learner()
    watcher = await stack.transport.consumer(
        Queue.parse(stack.learner_topics["conversation-ended"]), "watcher"
    )
    try:
        for n in range(3):
            await stack.append_turn(trajectory(f"s{n}", question=lunch(n), answer=f"A{n}"))
        await stack.ask(
            "conversation-memory",
            ConversationRequest(operation="end", user="alice", conversation_id="c1"),
        )
        delivery = await asyncio.wait_for(watcher.receive(), 30)
        await watcher.ack(delivery)
    finally:
        await watcher.close()
    await stack.settled("conversation-ended")

    facts = await stack.facts()
    assert sorted(f.content for f in facts) == [
        "Alice is allergic to peanuts.",
        "Alice lives in Leeds.",
        "The user's name is Alice.",  # said in so many words
    ]
    assert {f.source_conversation for f in facts} == {"c1"}
    [request] = stack.llm_asked("facts")
    assert "Question 2 about lunch plans" in request.prompt
    [episode] = await stack.episodes()  # the conversation's own episode (3 turns)
    assert (episode.session_id or "").startswith("conversation-end:")
    assert [s.thought for s in episode.steps] == [lunch(n) for n in range(3)]

    await stack.publish(delivery.data, "conversation-ended")  # redelivered
    await stack.settled("conversation-ended", 2)
    assert len(await stack.facts()) == 3 and len(await stack.episodes()) == 1
    assert len(stack.llm_asked("facts")) == 1
    assert stack.sample("tg_memory_learner_duplicates_total", kind="conversation-ended") == 1


async def test_agent_mem_config_turns_promotion_off(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    await stack.start_learner(
        agent_mem={"enable-auto-fact-extraction": "false", "enable-episode-recording": "true"}
    )
    event = ConversationEnded(
        workspace="default",
        collection="default",
        user="alice",
        conversation_id="c9",
        summary="Alice planned a trip to Lisbon.",
        event_id="e-1",
        turns=[ConversationTurn(query="Please remember that I like window seats.")],
    )
    await stack.publish(event, "conversation-ended")
    await stack.settled("conversation-ended")
    assert stack.llm.requests == [] and await stack.facts() == []
    assert await stack.episodes() == []  # recording is on, but a conversation of one turn


async def test_bad_input_is_settled_and_the_consumer_keeps_going(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    await stack.start_learner()
    queue = Queue.parse(stack.learner_topics["trajectory"])
    subscription = f"{stack.pid}--default--f1--trajectory"
    dead = await stack.transport.consumer(
        dead_letter_queue(queue, subscription), "check", from_earliest=True
    )
    try:
        await stack.publish(b"{not json", "trajectory")
        await stack.publish(Trajectory(question="no ids"), "trajectory")
        await stack.publish(trajectory(duration_seconds=float("inf")), "trajectory")
        await stack.publish(ConversationEnded(conversation_id="c1"), "conversation-ended")
        await stack.settled("trajectory", 3, status="error")
        await stack.settled("conversation-ended", 1, status="error")
        delivery = await asyncio.wait_for(dead.receive(), 30)
        assert delivery.data == b"{not json"
        assert delivery.properties["dlq-reason"] == "invalid"
    finally:
        await dead.close()

    good = trajectory()
    await stack.append_turn(good)
    await stack.publish(good, "trajectory")
    await stack.settled("trajectory")
    assert len(await stack.facts()) == 2
    assert stack.llm.requests and all("no ids" not in r.prompt for r in stack.llm.requests)


# -- quota (issue 11, defect 5) --------------------------------------------------------------
REMEMBER = "Please remember that I am allergic to peanuts."


async def fill(stack: Stack, user: str, *contents: str, importance: float = 0.3) -> None:
    facts = [FactInput(content=c, importance=importance) for c in contents]
    await stack.ask("fact-memory", FactRequest(operation="store", user=user, facts=facts))


def store_attempts(stack: Stack) -> float:
    """Requests the learner sent to fact-memory (only stores, where it is started with
    ``judge_fact_changes`` off: the judgement retrieves each fact's neighbours first)."""
    return stack.sample(
        "tg_downstream_call_duration_seconds_count", target_service="fact-memory-request"
    )


async def test_an_explicit_fact_at_the_user_quota_is_stored_by_evicting_the_least_important(
    stack: Stack,
) -> None:
    await stack.start_service("fact-memory", max_facts_per_scope=2)
    await fill(stack, "alice", "Alice likes jazz.", importance=0.3)
    await fill(stack, "alice", "Alice owns a bike.", importance=0.6)
    stack.llm.script = answers(facts=[])
    await stack.start_learner(judge_fact_changes=False)
    await stack.publish(trajectory(question=REMEMBER), "trajectory")
    await stack.settled("trajectory")

    held = sorted(f.content for f in await stack.facts())
    assert held == ["Alice owns a bike.", "The user is allergic to peanuts."]
    assert store_attempts(stack) == 1
    assert stack.sample("tg_memory_learner_evicted_total", kind="fact") == 1
    labels = {"processor": f"fact-memory-{stack.unique}", "kind": "fact"}
    evictions = stack.service_registries["fact-memory"].get_sample_value(
        "tg_memory_quota_evictions_total", labels
    )
    assert evictions == 1
    assert stack.sample("tg_memory_learner_records_total", kind="trajectory", outcome="learned")


async def test_at_the_collection_quota_a_fact_is_refused_once_and_recorded(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    await stack.start_service("fact-memory", max_facts_per_collection=2)
    # Another user filled the collection: inventing a new user id does not escape it.
    await fill(stack, "bob", "Bob likes jazz.", "Bob owns a bike.", importance=0.1)
    stack.llm.script = answers(facts=["Maria, the user's sister, lives in Lisbon."])
    await stack.start_learner(max_redeliveries=5, judge_fact_changes=False)
    t = trajectory(question=REMEMBER)
    await stack.append_turn(t)
    with caplog.at_level(logging.INFO):
        await stack.publish(t, "trajectory")
        await stack.settled("trajectory")

    assert store_attempts(stack) == 1  # quota is a final answer: not retried
    assert (
        stack.sample("tg_consumer_redelivery_total", consumer=stack.learner_topics["trajectory"])
        == 0
    )
    assert await stack.facts() == []
    assert len(await stack.facts(user="bob")) == 2  # never another user's facts evicted
    assert (
        stack.sample("tg_memory_learner_rejected_total", kind="fact", reason="quota-exceeded") == 1
    )
    partial = {"kind": "trajectory", "outcome": "partial"}
    assert stack.sample("tg_memory_learner_records_total", **partial) == 1
    assert (await stack.conversation()).summary == SUMMARY  # the other writes went ahead
    assert len(await stack.episodes()) == 1
    assert stack.learner is not None
    entry = await stack.learner.started.state.get("default", "trajectory:s1")
    assert entry is not None and entry.done and entry.outcome == "facts: quota-exceeded"
    refused = [r.getMessage() for r in caplog.records if "quota-exceeded" in r.getMessage()]
    assert refused, "the refusal is logged"
    assert not any("peanut" in r.getMessage() for r in caplog.records)  # not the user's words


async def test_the_lag_gauge_shows_how_old_the_trajectory_being_learned_is(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    release = asyncio.Event()
    script = answers()

    async def held(request: TextCompletionRequest) -> Reply:
        if "facts" in (request.schema_ or {}).get("properties", {}):
            await release.wait()
        return script(request)  # type: ignore[no-any-return]

    stack.llm.script = held
    await stack.start_learner()
    age = "tg_memory_learner_trajectory_age_seconds"
    assert stack.sample(age) == 0
    await stack.append_turn(trajectory())
    await stack.publish(trajectory(finished_at=time.time() - 3600), "trajectory")
    await eventually(lambda: stack.sample(age) >= 3600, timeout=30)
    release.set()
    await stack.settled("trajectory")
    assert stack.sample(age) == 0


# -- PII (issue 13, defect 6) -----------------------------------------------------------------
CARD = "4111 1111 1111 1111"
EMAIL = "maria.lisbon@example.com"


async def test_what_the_learner_writes_is_redacted_by_the_services(stack: Stack) -> None:
    await stack.start_service("fact-memory")
    stack.llm.script = answers(
        facts=[f"Maria, the user's sister, is reachable at {EMAIL}."],
        summary=f"The user asked where Maria lives; she is reachable at {EMAIL}.",
    )
    await stack.start_learner()
    said = f"My card is {CARD}; where does my sister Maria live? Is she reachable at {EMAIL}?"
    t = trajectory(question=said)
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory")

    [fact] = await stack.facts()
    assert fact.content == "Maria, the user's sister, is reachable at <EMAIL_ADDRESS>."
    [episode] = await stack.episodes()
    assert CARD not in episode.goal and "<CREDIT_CARD>" in episode.goal
    conversation = await stack.conversation()
    assert (
        conversation.summary
        == "The user asked where Maria lives; she is reachable at <EMAIL_ADDRESS>."
    )
    assert all(CARD not in turn.query and EMAIL not in turn.query for turn in conversation.turns)


async def test_under_drop_a_fact_with_pii_is_refused_once_and_recorded(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    await stack.start_service("fact-memory", pii_policy="drop")
    stack.llm.script = answers(facts=[f"The user's card number is {CARD}."])
    await stack.start_learner(max_redeliveries=5, judge_fact_changes=False)
    said = f"{REMEMBER} My card number is {CARD}."
    with caplog.at_level(logging.INFO):
        await stack.publish(trajectory(question=said), "trajectory")
        await stack.settled("trajectory")

    assert store_attempts(stack) == 1  # a refusal is a final answer: not retried
    assert await stack.facts() == []
    assert stack.sample("tg_memory_learner_rejected_total", kind="fact", reason="pii-refused") == 1
    assert stack.learner is not None
    entry = await stack.learner.started.state.get("default", "trajectory:s1")
    assert entry is not None and entry.done and entry.outcome == "facts: pii-refused"
    assert not any(CARD in r.getMessage() for r in caplog.records)  # never the detected text
