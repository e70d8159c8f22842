"""The multi-session demo: a fact told in one conversation is recalled in a later one.

It talks to a running stack over the bus like any client, and reports in plain words what
was stored, what was recalled into the prompt, and what the model answered. A tiny model
answers poorly; the memory mechanics are shown from the services and the trajectory
records, so they are visible whatever the model says.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Consumer, Transport
from react_mem.clients.conversations import ConversationClient
from react_mem.clients.facts import FactClient
from react_mem.demo.probe import EPISODE, QUESTION, mentions_fact
from react_mem.schema import AgentRequest, AgentResponse
from react_mem.schema.conversations import ConversationResponse
from react_mem.schema.facts import Fact, FactResponse
from react_mem.schema.scope import Scope
from react_mem.schema.trajectory import Trajectory
from react_mem.stack import agent_queues

USER = "demo-user"
#: The demo user's memory in the stack's default workspace and collection.
OWNER = Scope("default", "default", USER)
TRAJECTORIES = "flow:tg:agent-trajectory:default:default"

SESSIONS = [("trip-planning", EPISODE), ("snacks", QUESTION)]


@dataclass
class Turn:
    conversation: str
    question: str
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    answer: str = ""
    error: str | None = None
    trajectory: Trajectory | None = None
    #: Seconds from the question sent to the answer received.
    seconds: float = 0.0


class Demo:
    def __init__(self, transport: Transport, out: TextIO, *, timeout: float = 300.0) -> None:
        self.transport, self.out, self.timeout = transport, out, timeout
        self.clients: dict[str, RequestResponseClient[Any, Any]] = {}
        self.trajectories: Consumer | None = None

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    async def __aenter__(self) -> Demo:
        req, resp = agent_queues()
        specs: dict[str, tuple[str, str, type[Any]]] = {
            "agent": (req, resp, AgentResponse),
            "facts": (
                "request:tg:fact-memory:default:default",
                "response:tg:fact-memory:default:default",
                FactResponse,
            ),
            "conversations": (
                "request:tg:conversation-memory:default:default",
                "response:tg:conversation-memory:default:default",
                ConversationResponse,
            ),
        }
        for name, (request, response, schema) in specs.items():
            client: RequestResponseClient[Any, Any] = RequestResponseClient(
                self.transport,
                request,
                response,
                schema,
                subscriber="react-mem-demo",
                timeout=self.timeout,
            )
            await client.start()
            self.clients[name] = client
        # Subscribed before anything is asked, so no trajectory is missed.
        self.trajectories = await self.transport.consumer(
            Queue.parse(TRAJECTORIES), f"react-mem-demo-{uuid.uuid4().hex[:8]}"
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        for client in self.clients.values():
            await client.close()
        if self.trajectories is not None:
            await self.trajectories.close()

    async def ask(self, turn: Turn) -> None:
        self.say(f"\n[{turn.conversation}] You: {turn.question}")
        request = AgentRequest(
            question=turn.question,
            conversation_id=turn.conversation,
            session_id=turn.session_id,
            user=USER,
        )
        started = time.monotonic()
        async for r in self.clients["agent"].stream(
            request, last=lambda r: r.end_of_dialog or r.error is not None
        ):
            if r.message_type == "thought" and r.content:
                self.say(f"  (thought) {r.content}")
            elif r.message_type == "observation":
                self.say(f"  (observation) {r.content}")
            elif r.message_type == "answer":
                turn.answer = r.content
            if r.error is not None:
                turn.error = r.error.message
        turn.seconds = time.monotonic() - started
        reply = turn.answer or "(error) " + str(turn.error)
        self.say(f"[{turn.conversation}] Agent ({turn.seconds:.1f} s): {reply}")
        turn.trajectory = await self.trajectory_of(turn.session_id)

    async def trajectory_of(self, session_id: str) -> Trajectory | None:
        assert self.trajectories is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                delivery = await asyncio.wait_for(self.trajectories.receive(), 5)
            except TimeoutError:
                continue
            await self.trajectories.ack(delivery)
            trajectory = Trajectory.decode(delivery.data)
            if trajectory.session_id == session_id:
                return trajectory
        return None

    async def facts(self, query: str | None = None) -> list[Fact]:
        facts = FactClient(self.clients["facts"], timeout=30)
        if query:
            return await facts.retrieve(OWNER, query, top_k=5)
        return (await facts.page(OWNER, limit=20)).items

    async def wait_for_learner(self, conversation: str, say: Callable[[str], None]) -> list[Fact]:
        """The learner works after the reply, off the reply path: its rolling summary of the
        conversation comes first, then facts; wait for both (facts for a while only: there
        may be none worth keeping)."""
        began = time.monotonic()
        summarised_at: float | None = None
        while time.monotonic() - began < self.timeout:
            if summarised_at is None and await self.rolling_summary(conversation):
                summarised_at = time.monotonic()
            found = await self.facts()
            if found or (summarised_at is not None and time.monotonic() - summarised_at > 60):
                return found
            say(f"  ... the memory learner is working ({time.monotonic() - began:.0f} s)")
            await asyncio.sleep(3)
        return []

    async def rolling_summary(self, conversation: str) -> str:
        client = ConversationClient(self.clients["conversations"], timeout=30)
        found = await client.get(OWNER.with_conversation(conversation))
        return found.summary if found else ""


async def run_demo(transport: Transport, out: TextIO) -> bool:
    """The two sessions; True when the fact from the first was recalled in the second."""
    async with Demo(transport, out) as demo:
        say = demo.say
        first, second = (Turn(c, q) for c, q in SESSIONS)
        say("\n== Session 1: tell the agent something about yourself ==")
        await demo.ask(first)
        if first.error is not None:
            # A failed ask leaves no trajectory: the learner has nothing to wait for.
            say(
                "  The agent could not answer, so nothing was learned from session 1 (on a "
                "busy machine the local LLM may miss the agent's llm-timeout)."
            )
            stored = []
        else:
            stored = await demo.wait_for_learner(first.conversation, say)
        say("\nWhat memory stored after session 1:")
        summary = await demo.rolling_summary(first.conversation)
        say(f"  conversation '{first.conversation}', rolling summary: {summary or '(none yet)'}")
        for fact in stored:
            say(f"  long-term fact: {fact.content}  (learned in '{fact.source_conversation}')")
        if not stored:
            say("  no long-term fact was extracted (the model found nothing worth keeping)")

        say("\n== Session 2: a new conversation, later ==")
        await demo.ask(second)
        used = second.trajectory.memory_used if second.trajectory else []
        recalled = [u for u in used if u.kind == "fact"]
        say("\nWhat memory put into the prompt of session 2 (before the model saw the question):")
        for item in used:
            label = "similarity" if item.kind in ("fact", "episode") else "score"
            score = f" ({label} {item.score:.2f})" if item.score is not None else ""
            say(f"  {item.kind}: {item.content}{score}")
        if not used:
            say("  nothing")
        carried = any(f.id in {r.id for r in recalled} for f in stored)
        say("\nIn plain words:")
        if carried:
            say(
                f"  - In '{first.conversation}' you said something the learner kept as a fact; "
                f"in '{second.conversation}', a different conversation, that fact was recalled "
                "into the agent's prompt."
            )
        else:
            say("  - No fact from session 1 reached the prompt of session 2.")
        if mentions_fact(second.answer):
            say("  - The answer mentions the peanut allergy: the model used what memory recalled.")
        else:
            say(
                "  - The answer does not mention the peanut allergy: the model did not use the "
                "recalled fact (a 135M-parameter model often ignores its context)."
            )
        say(f"  - Answer times: session 1 {first.seconds:.1f} s, session 2 {second.seconds:.1f} s.")
        return carried
