"""The learning curve through the real agent (``ace_curve.py --policy openai``).

Every part runs as the stack runs it, in this process on an in-process bus: the agent
(``AgentProcessor``), text completion through an OpenAI-compatible endpoint
(``OpenAICompatibleProcessor``), playbook-memory and episode-memory (edge store), the memory
learner, and the suite's deterministic tools as a TrustGraph ``tool-service``. Each arm is
a workspace with its own flows: ``ace-on`` publishes trajectories to the learner, which
curates the playbook (episodes off), and each answer's verdict goes back as react-mem
feedback with the task's right answer (``Feedback.ground_truth``), as an evaluation client
sends it; ``episodes`` records and recalls episodes (no
playbook learning); ``ace-off`` and ``oracle`` learn nothing. Tasks run one at a time and
each waits for its trajectory to be learned, so the next prompt sees what it taught.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.agent.service import AgentProcessor
from react_mem.bus.in_process import InProcessTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.clients.playbook import PlaybookClient, PlaybookRef
from react_mem.embedding.base import Embedder
from react_mem.learner.heuristic import matches
from react_mem.learner.service import MemoryLearnerProcessor
from react_mem.llm.openai_compat import OpenAICompatibleProcessor
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema import AgentRequest, AgentResponse
from react_mem.schema.playbook import Delta, DeltaOperation, Feedback, PlaybookResponse
from react_mem.schema.services import ToolServiceRequest, ToolServiceResponse
from react_mem.schema.trajectory import Trajectory

FLOW = "curve"
LEARNS = {
    "ace-on": (True, False),
    "ace-off": (False, False),
    "episodes": (False, True),
    "oracle": (False, False),
}
TOOLS = ("tool-service", "curve-tools")


class ToolServer(Processor):
    """The suite's tools as a TrustGraph tool service: ``config.method`` names the tool;
    it answers for the task being run (``current``)."""

    default_id: ClassVar[str] = "curve-tools"
    current: Any = None

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, *, registry: CollectorRegistry
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.serve_requests(ToolServiceRequest, ToolServiceResponse, self.on_request)

    async def on_request(self, request: ToolServiceRequest, ctx: MessageContext) -> None:
        method = json.loads(request.config or "{}").get("method", "")
        task = self.current
        if task is None or method not in task.tools:
            result = f"{method} does not apply to this task"
        else:
            result = task.run(method)
        await ctx.reply(ToolServiceResponse(response=result, end_of_stream=True))


def q(cls: str, name: str, ws: str) -> str:
    return f"{cls}:tg:{name}:{ws}:{FLOW}"


def pair(name: str, ws: str, prefix: str = "") -> dict[str, str]:
    """A service's request and response queues as a client's flow names them."""
    return {
        f"{prefix}request": q("request", name, ws),
        f"{prefix}response": q("response", name, ws),
    }


def tool_config(tools: list[str], describe: Callable[[str], str]) -> dict[str, dict[str, str]]:
    service = {
        "request-queue": q("request", TOOLS[1], "tools"),
        "response-queue": q("response", TOOLS[1], "tools"),
        "config-params": [{"name": "method", "required": True}],
    }
    tool = {
        name: json.dumps(
            {
                "type": "tool-service",
                "name": name,
                "description": describe(name),
                "service": TOOLS[1],
                "method": name,
                "arguments": [{"name": "question", "type": "string", "description": "the task"}],
            }
        )
        for name in tools
    }
    return {"tool-service": {TOOLS[1]: json.dumps(service)}, "tool": tool}


@contextlib.asynccontextmanager
async def agent_stack(
    root: Path,
    embedder: Embedder,
    arms: tuple[str, ...],
    tools: list[str],
    *,
    llm_url: str,
    llm_model: str,
    playbook_settings: dict[str, Any],
) -> AsyncIterator[dict[str, Any]]:
    transport = InProcessTransport()
    await transport.connect()
    registry = CollectorRegistry()
    started: list[Processor] = []

    async def start(cls: Any, pid: str, flows: dict[str, Any], **extra: Any) -> Any:
        path = root / f"flows-{pid}.json"
        path.write_text(json.dumps(flows))
        settings = cls.Settings.load({"id": pid, "flows": path, "metrics": False, **extra})
        kwargs: dict[str, Any] = {"registry": registry}
        if cls in (PlaybookMemoryProcessor, EpisodeMemoryProcessor, AgentProcessor):
            kwargs["embedder"] = embedder
        processor = cls(settings, transport, **kwargs)
        await processor.start()
        started.append(processor)
        return processor

    def each(make: Callable[[str], dict[str, Any] | None], pid: str) -> dict[str, Any]:
        flows: dict[str, Any] = {}
        for ws in arms:
            topics = make(ws)
            if topics is not None:
                flows[ws] = {f"processor:{pid}": {FLOW: {"topics": topics}}}
        return flows

    describe = {t: f"Computes the answer the {t} way." for t in tools}
    try:
        await start(
            OpenAICompatibleProcessor,
            "text-completion",
            each(lambda ws: pair("text-completion", ws), "text-completion"),
            base_url=llm_url,
            model=llm_model,
        )
        for name, cls in (
            ("playbook-memory", PlaybookMemoryProcessor),
            ("episode-memory", EpisodeMemoryProcessor),
        ):
            extra = playbook_settings if name == "playbook-memory" else {}
            await start(
                cls, name, each(lambda ws, n=name: pair(n, ws), name), data_dir=root / name, **extra
            )
        tool_flows = {
            "tools": {"processor:curve-tools": {FLOW: {"topics": pair(TOOLS[1], "tools")}}}
        }
        server = await start(ToolServer, "curve-tools", tool_flows)

        def learner(ws: str) -> dict[str, Any] | None:
            ace, episodes = LEARNS[ws]
            if not (ace or episodes):
                return None
            topics = {
                "trajectory": q("flow", "agent-trajectory", ws),
                "conversation-ended": q("flow", "conversation-ended", ws),
                **pair("text-completion", ws, "text-completion-"),
                **pair("episode-memory", ws, "episode-memory-"),
                **pair("fact-memory", ws, "fact-memory-"),
                **pair("conversation-memory", ws, "conversation-memory-"),
            }
            if ace:
                topics |= pair("playbook-memory", ws, "playbook-memory-")
                topics["feedback"] = q("flow", "agent-feedback", ws)
            return topics

        learner_proc = await start(
            MemoryLearnerProcessor,
            "memory-learner",
            each(learner, "memory-learner"),
            state_dir=root / "learner",
        )
        agent_flows: dict[str, Any] = {}
        for ws in arms:
            topics = {
                "request": q("request", "agent", ws),
                "next": q("request", "agent", ws),
                "response": q("response", "agent", ws),
                "trajectory": q("flow", "agent-trajectory", ws),
                **pair("text-completion", ws, "text-completion-"),
                **pair("playbook-memory", ws, "playbook-memory-"),
            }
            if LEARNS[ws][1]:
                topics |= pair("episode-memory", ws, "episode-memory-")
            agent_mem = {
                "reply-format": "json",
                "enable-memory-tools": "false",
                "enable-auto-fact-extraction": "false",
                "enable-episode-recording": json.dumps(LEARNS[ws][1]),
            }
            agent_flows[ws] = {
                "processor:agent": {FLOW: {"topics": topics}},
                "agent-mem": agent_mem,
                **tool_config(tools, describe.__getitem__),
            }
        await start(AgentProcessor, "agent", agent_flows, state_dir=root / "agent")
        yield {
            "transport": transport,
            "tools": server,
            "learner": learner_proc,
            "registry": registry,
        }
    finally:
        for processor in reversed(started):
            await processor.stop()
        await transport.close()


async def ask(transport: Transport, ws: str, request: AgentRequest) -> tuple[str, int]:
    """The agent's answer and the prompt tokens its LLM calls reported."""
    client: RequestResponseClient[AgentRequest, AgentResponse] = RequestResponseClient(
        transport, q("request", "agent", ws), q("response", "agent", ws), AgentResponse
    )
    await client.start()
    try:
        answer, tokens = "", 0
        async for r in client.stream(request, last=lambda r: r.end_of_dialog, timeout=600):
            if r.message_type == "answer":
                answer, tokens = r.content, r.in_token or 0
        return answer, tokens
    finally:
        await client.close()


async def run_through_agent(
    tasks: list[Any],
    arms: tuple[str, ...],
    seeds: dict[str, list[DeltaOperation]],
    *,
    epochs: int,
    seed_value: int,
    root: Path,
    embedder: Embedder,
    llm_url: str,
    llm_model: str,
    playbook_settings: dict[str, Any],
    epoch_type: Callable[..., Any],
    recommends_wrong: Callable[[str], bool],
) -> dict[str, list[Any]]:
    import random

    tools = sorted({t for task in tasks for t in task.tools})
    async with agent_stack(
        root,
        embedder,
        arms,
        tools,
        llm_url=llm_url,
        llm_model=llm_model,
        playbook_settings=playbook_settings,
    ) as s:
        transport = s["transport"]
        results: dict[str, list[Any]] = {}
        done = judged = 0
        verdicts = {
            ws: await transport.producer(Queue.parse(q("flow", "agent-feedback", ws)))
            for ws in arms
            if LEARNS[ws][0]
        }
        for ws in arms:
            book: RequestResponseClient[Any, PlaybookResponse] = RequestResponseClient(
                transport,
                q("request", "playbook-memory", ws),
                q("response", "playbook-memory", ws),
                PlaybookResponse,
            )
            await book.start()
            playbook = PlaybookClient(book)
            await playbook.apply_delta(PlaybookRef(), Delta(delta_id="seed", operations=seeds[ws]))
            consumer = await transport.consumer(
                Queue.parse(q("flow", "agent-trajectory", ws)), f"curve-{ws}"
            )
            figures = []
            for epoch in range(1, epochs + 1):
                order = list(tasks)
                random.Random(f"order-{seed_value}-{epoch}").shuffle(order)
                wins, tokens, harmful = [], [], set()
                for n, task in enumerate(order):
                    s["tools"].current = task
                    session = f"{ws}-{epoch}-{n}"
                    request = AgentRequest(
                        question=task.question, session_id=session, task_type=task.task_type
                    )
                    answer, used = await ask(transport, ws, request)
                    delivery = await asyncio.wait_for(consumer.receive(), 600)
                    await consumer.ack(delivery)
                    t = Trajectory.decode(delivery.data)
                    shown = t.bullets_shown()
                    if shown:
                        held = await playbook.get(PlaybookRef(), shown)
                        harmful |= {b.id for b in held if b.harmful > b.helpful}
                    if any(LEARNS[ws]):
                        done += 1
                        await learned(s["registry"], done)
                    if LEARNS[ws][0]:  # the evaluator's verdict, as react-mem feedback
                        judged += 1
                        feedback = Feedback(
                            feedback_id=session, session_id=session, ground_truth=task.truth
                        )
                        await verdicts[ws].send(feedback.encode(), {"id": session})
                        await learned(s["registry"], judged, "feedback")
                    tokens.append(used)
                    if task.family is not None:
                        wins.append(matches(answer, task.truth))
                listed = (await playbook.page(PlaybookRef(), limit=1000)).items
                figures.append(
                    epoch_type(
                        success=sum(wins) / max(len(wins), 1),
                        tokens=statistics.fmean(tokens),
                        bullets=len(listed),
                        harmful_held=sum(1 for b in listed if b.harmful > b.helpful),
                        harmful_shown=len(harmful),
                        wrong_helpful=sum(b.helpful for b in listed if recommends_wrong(b.content)),
                    )
                )
            await consumer.close()
            await book.close()
            results[ws] = figures
        for producer in verdicts.values():
            await producer.close()
        return results


def records_learned(registry: CollectorRegistry, kind: str) -> float:
    """Records of ``kind`` (trajectory, feedback) the learner finished, whatever it wrote."""
    return sum(
        registry.get_sample_value(
            "tg_memory_learner_records_total",
            {"processor": "memory-learner", "kind": kind, "outcome": outcome},
        )
        or 0.0
        for outcome in ("learned", "partial", "empty")
    )


async def learned(
    registry: CollectorRegistry, count: float, kind: str = "trajectory", wait: float = 600
) -> None:
    """Until the learner has finished ``count`` records of ``kind``."""
    deadline = time.monotonic() + wait
    while records_learned(registry, kind) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the learner did not learn record {count:g} within {wait:g} s")
        await asyncio.sleep(0.01)
