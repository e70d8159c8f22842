"""``react-mem ask`` against a scripted agent and ``react-mem memory`` against the real
memory services, over the real embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from memory_services.processor import MemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.transport import Transport
from react_mem.cli import build_parser
from react_mem.commands import memory_command
from react_mem.commands.ask import AskOptions, ask
from react_mem.commands.common import ServiceQueues
from react_mem.errors import BadRequest
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema import AgentRequest, AgentResponse, Error
from react_mem.schema.base import WireModel
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.memory_services import MovableClock, Running, serving
from tests.support.ping import flow_file
from tests.support.rabbitmq import cli_bus_args

pytestmark = pytest.mark.broker

Script = Callable[[AgentRequest], list[AgentResponse]]


def chunk(kind: str, content: str, message_id: str, *, end: bool = False) -> AgentResponse:
    return AgentResponse(
        message_type=kind, content=content, message_id=message_id, end_of_message=end
    )


def streamed(request: AgentRequest) -> list[AgentResponse]:
    """TrustGraph's streaming shape: chunks per message, then an empty terminal answer."""
    return [
        chunk("thought", "I should ", "t1"),
        chunk("thought", "look it up.", "t1", end=True),
        AgentResponse(
            message_type="explain", content="graph", explain_id="urn:x", end_of_message=True
        ),
        chunk("action", "knowledge-query", "a1", end=True),
        chunk("observation", "Paris is the capital of France.", "o1", end=True),
        chunk("answer", "The capital ", "ans"),
        chunk("answer", "is Paris.", "ans"),
        AgentResponse(
            message_type="answer", message_id="ans", end_of_message=True, end_of_dialog=True
        ),
    ]


def whole(request: AgentRequest) -> list[AgentResponse]:
    """The non-streaming shape: one message per step, the answer ends the dialog."""
    return [
        AgentResponse(message_type="thought", content="Easy.", end_of_message=True),
        AgentResponse(
            message_type="answer",
            content=f"You asked: {request.question}",
            end_of_message=True,
            end_of_dialog=True,
        ),
    ]


def failing(request: AgentRequest) -> list[AgentResponse]:
    return [
        AgentResponse(message_type="thought", content="Trying.", end_of_message=True),
        AgentResponse(
            message_type="error",
            error=Error(type="agent-error", message="llm-error: model unavailable"),
            end_of_message=True,
            end_of_dialog=True,
        ),
    ]


class ScriptedAgent(Processor):
    """A test double for the agent: replies to each AgentRequest with a scripted stream."""

    default_id: ClassVar[str] = "scripted-agent"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        script: Script = streamed,
        delay: float = 0.0,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.script, self.delay = script, delay
        self.received: list[AgentRequest] = []
        self.serve_requests(AgentRequest, AgentResponse, self.on_request)

    async def on_request(self, request: AgentRequest, ctx: MessageContext) -> None:
        self.received.append(request)
        await asyncio.sleep(self.delay)
        for response in self.script(request):
            await ctx.reply(response)


@contextlib.asynccontextmanager
async def scripted_agent(
    transport: PulsarTransport, tmp_path: Path, flow: str, **kwargs: Any
) -> AsyncIterator[ScriptedAgent]:
    """The agent double on the stack's agent queues of workspace ``default``, flow ``flow``."""
    pid = f"agent-{flow}"
    queues = ServiceQueues.of("agent", "default", flow)
    flows = flow_file(tmp_path, pid, {"request": queues.request, "response": queues.response}, flow)
    settings = ProcessorSettings.load({"id": pid, "flows": flows, "metrics": False})
    agent = ScriptedAgent(settings, transport, registry=CollectorRegistry(), **kwargs)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def run_ask(
    transport: Transport, question: str, flow: str, **options: Any
) -> tuple[int, str, str]:
    out, err = io.StringIO(), options.pop("err", io.StringIO())
    code = await ask(
        transport,
        AskOptions(question=question, flow=flow, timeout=options.pop("timeout", 10.0), **options),
        out=out,
        err=err,
        progress_interval=0.1,
    )
    return code, out.getvalue(), err.getvalue()


async def test_ask_streams_labelled_chunks_and_carries_the_conversation(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with scripted_agent(transport, tmp_path, unique) as agent:
        code, out, err = await run_ask(
            transport,
            "Capital of France?",
            unique,
            conversation="conv-7",
            user="alice",
            collection="geo",
        )
        assert code == 0, err
        assert out == (
            "Thought: I should look it up.\n"
            "Action: knowledge-query\n"
            "Observation: Paris is the capital of France.\n"
            "Answer: The capital is Paris.\n"
        )
        # A given conversation is not announced, no progress off a TTY: the session alone.
        [request] = agent.received
        assert err.startswith(f"session {request.session_id} ") and err.count("\n") == 1
        assert (request.question, request.conversation_id, request.user) == (
            "Capital of France?",
            "conv-7",
            "alice",
        )
        assert request.collection == "geo" and request.streaming is True
        assert uuid.UUID(request.session_id)

        verbose = await run_ask(transport, "Again?", unique, conversation="conv-7", verbose=True)
        assert "Explain: [urn:x] graph\n" in verbose[1]


async def test_ask_without_a_conversation_starts_one_that_can_be_continued(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with scripted_agent(transport, tmp_path, unique, script=whole) as agent:
        code, out, err = await run_ask(transport, "Hi?", unique, streaming=False)
        assert code == 0
        assert out == "Thought: Easy.\nAnswer: You asked: Hi?\n"
        found = re.search(r"continue it with --conversation (\S+)\)", err)
        assert found is not None, err
        conversation = found.group(1)
        assert agent.received[0].conversation_id == conversation
        assert agent.received[0].streaming is False and agent.received[0].user is None

        code, out, _ = await run_ask(
            transport, "And then?", unique, conversation=conversation, json=True
        )
        assert code == 0
        result = json.loads(out)
        second = agent.received[1]
        assert result["conversation_id"] == second.conversation_id == conversation
        assert result["session_id"] == second.session_id != agent.received[0].session_id
        assert result["answer"] == "You asked: And then?"
        assert [m["type"] for m in result["messages"]] == ["thought", "answer"]
        assert result["error"] is None


async def test_ask_reports_an_agent_error_on_stderr_with_exit_code_1(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with scripted_agent(transport, tmp_path, unique, script=failing):
        code, out, err = await run_ask(transport, "Q?", unique, conversation="c")
    assert code == 1
    assert out == "Thought: Trying.\n"
    assert "agent error: llm-error: model unavailable" in err


async def test_ask_ends_on_a_failed_request_reply_without_end_of_dialog(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    def refuse(request: AgentRequest) -> list[AgentResponse]:
        raise BadRequest("question too long", type="too-large")

    async with scripted_agent(transport, tmp_path, unique, script=refuse):
        code, _, err = await run_ask(transport, "Q?", unique, conversation="c", timeout=20)
    assert code == 1
    assert "agent error (too-large): question too long" in err
    assert "stopped responding" not in err  # the error reply ended the stream, not a timeout


async def test_ask_times_out_with_a_hint_when_no_agent_listens(
    transport: PulsarTransport, unique: str
) -> None:
    code, out, err = await run_ask(transport, "Anyone?", unique, conversation="c", timeout=0.5)
    assert code == 1 and out == ""
    assert f"no response from the agent on request:tg:agent:default:{unique}" in err
    assert "react-mem up" in err


async def test_ask_gives_up_on_an_agent_that_stops_mid_dialog(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with scripted_agent(transport, tmp_path, unique, script=lambda r: failing(r)[:1]):
        code, out, err = await run_ask(transport, "Q?", unique, conversation="c", timeout=1)
    assert code == 1 and out == "Thought: Trying.\n"
    assert "the agent stopped responding within 1s (raise --timeout" in err


async def test_ask_shows_elapsed_seconds_on_a_terminal_while_waiting(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with scripted_agent(transport, tmp_path, unique, script=whole, delay=1.2):
        code, out, err = await run_ask(transport, "Slow?", unique, conversation="c", err=Terminal())
    assert code == 0 and out.endswith("Answer: You asked: Slow?\n")
    assert "\rwaiting for the agent (1s)" in err
    status, session = err.rsplit("\n", 2)[0].rsplit("\r\033[K", 1)
    assert status and session.startswith("session ")  # the status line is erased first


# -- memory ------------------------------------------------------------------------


async def run_memory(transport: Transport, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["memory", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = await memory_command.execute(transport, args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@contextlib.asynccontextmanager
async def memory_service(
    cls: type[MemoryProcessor],
    response: type[WireModel],
    service: str,
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    **extra_topics: str,
) -> AsyncIterator[Running[Any, Any, Any]]:
    """A real memory service on the stack's queue names in workspace ``cli-{unique}``."""
    queues = ServiceQueues.of(service, f"cli-{unique}", "f1")
    topics = {"request": queues.request, "response": queues.response, **extra_topics}
    async with serving(
        cls,
        response,
        transport,
        pid=f"{service}-{unique}",
        queues={f"cli-{unique}": topics},
        data_dir=tmp_path / service,
        registry=CollectorRegistry(),
        clock=MovableClock(),
        retry_delay=0.01,
        metrics=False,
    ) as running:
        yield running


def rows(out: str) -> list[list[str]]:
    """Table rows (after the header) split into columns."""
    return [line.split(None, 1) for line in out.splitlines()[1:]]


async def test_memory_facts_list_search_delete_and_purge(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    where = ["--workspace", f"cli-{unique}", "--flow", "f1"]
    async with memory_service(
        FactMemoryProcessor, FactResponse, "fact-memory", transport, tmp_path, unique
    ) as service:
        contents = [
            "Carol has a pet tortoise named Sheldon.",
            "The quarterly report is due on the first Monday of April.",
        ]
        stored = await service.ask(
            FactRequest(operation="store", facts=[FactInput(content=c) for c in contents]),
            f"cli-{unique}",
        )
        carol, report = (s.id for s in stored.stored)
        alices = await service.ask(
            FactRequest(
                operation="store", user="alice", facts=[FactInput(content="Alice is vegetarian.")]
            ),
            f"cli-{unique}",
        )
        alice = alices.stored[0].id

        code, out, err = await run_memory(transport, "facts", "list", *where)
        assert code == 0, err
        assert out.splitlines()[0].split() == ["ID", "CONTENT"]
        # Without --user: the collection's shared facts, never alice's.
        assert sorted(map(tuple, rows(out))) == sorted(
            [(carol, contents[0]), (report, contents[1])]
        )
        code, out, _ = await run_memory(transport, "facts", "list", "--user", "alice", *where)
        assert rows(out) == [[alice, "Alice is vegetarian."]]

        code, out, _ = await run_memory(
            transport, "facts", "search", "Sheldon the tortoise", "-k", "2", *where
        )
        assert code == 0 and out.splitlines()[0].split() == ["ID", "SCORE", "CONTENT"]
        best_id, best_score, best_content = out.splitlines()[1].split(None, 2)
        assert (best_id, best_content) == (carol, contents[0]) and 0 < float(best_score) <= 1
        assert len(rows(out)) == 2

        code, out, _ = await run_memory(transport, "facts", "list", "--json", *where)
        assert code == 0 and len(json.loads(out)["facts"]) == 2

        code, out, _ = await run_memory(
            transport, "facts", "delete", carol, str(uuid.uuid4()), *where
        )
        assert (code, out) == (0, "deleted 1 fact (1 not found)\n")
        code, out, _ = await run_memory(transport, "facts", "list", *where)
        assert carol not in out and report in out

        code, out, err = await run_memory(transport, "facts", "delete", "not-an-id", *where)
        assert code == 1 and out == ""
        assert "fact-memory error" in err and "not-an-id" in err

        code, out, _ = await run_memory(
            transport, "facts", "purge", "--yes", "--user", "alice", *where
        )
        assert (code, out) == (0, "purged 1 fact record from collection default, user alice\n")
        code, out, _ = await run_memory(transport, "facts", "list", *where)
        assert [r[0] for r in rows(out)] == [report]
        code, out, _ = await run_memory(transport, "facts", "list", "--collection", "empty", *where)
        assert out == "no facts in collection empty\n"


async def test_memory_refuses_unconfirmed_purges_and_invalid_arguments(
    transport: PulsarTransport, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO())
    code, out, err = await run_memory(transport, "facts", "purge", "--workspace", unique)
    assert code == 1 and out == ""
    assert "this deletes every fact in collection default, with its history; add --yes" in err

    code, _, err = await run_memory(transport, "facts", "list", "--limit", "0")
    assert code == 2
    assert (
        err
        == "react-mem memory: invalid arguments: limit: Input should be greater than or equal to 1\n"
    )


async def test_memory_episodes_list_search_and_delete(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    where = ["--workspace", f"cli-{unique}", "--flow", "f1"]
    async with memory_service(
        EpisodeMemoryProcessor, EpisodeResponse, "episode-memory", transport, tmp_path, unique
    ) as service:
        ids = {}
        for goal, outcome in [
            ("convert 100 euros to dollars", "success"),
            ("book a table for two in Paris", "failure"),
        ]:
            response = await service.ask(
                EpisodeRequest(operation="store", goal=goal, outcome=outcome, session_id=goal),
                f"cli-{unique}",
            )
            ids[goal] = response.id

        code, out, err = await run_memory(transport, "episodes", "list", *where)
        assert code == 0, err
        assert out.splitlines()[0].split() == ["ID", "OUTCOME", "SCORE", "GOAL"]
        assert sorted(line.split(None, 3)[3] for line in out.splitlines()[1:]) == sorted(ids)
        code, out, _ = await run_memory(
            transport, "episodes", "list", "--outcome", "failure", *where
        )
        assert [r[0] for r in rows(out)] == [ids["book a table for two in Paris"]]

        code, out, _ = await run_memory(
            transport, "episodes", "search", "currency exchange", *where
        )
        best = out.splitlines()[1].split(None, 3)
        assert best[0] == ids["convert 100 euros to dollars"] and best[2] == "success"

        code, out, _ = await run_memory(
            transport, "episodes", "delete", ids["book a table for two in Paris"], *where
        )
        assert (code, out) == (0, "deleted 1 episode\n")
        code, out, _ = await run_memory(transport, "episodes", "list", "--json", *where)
        assert [e["goal"] for e in json.loads(out)["episodes"]] == ["convert 100 euros to dollars"]


async def test_memory_conversation_show_list_and_end(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    where = ["--workspace", f"cli-{unique}", "--flow", "f1", "--user", "bob"]
    ended = f"flow:tg:conversation-ended:cli-{unique}:f1"
    async with memory_service(
        ConversationMemoryProcessor,
        ConversationResponse,
        "conversation-memory",
        transport,
        tmp_path,
        unique,
        ended=ended,
    ) as service:
        for n, (query, answer) in enumerate(
            [("Where do I live?", "You live in Lisbon."), ("Any plans?", "A trip to Porto.")]
        ):
            response = await service.ask(
                ConversationRequest(
                    operation="append",
                    user="bob",
                    conversation_id="trip",
                    session_id=f"s{n}",
                    query=query,
                    answer=answer,
                    result="success",
                ),
                f"cli-{unique}",
            )
            assert response.error is None, response.error

        code, out, err = await run_memory(transport, "conversation", "show", "trip", *where)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == "conversation trip in collection default, user bob: 2 turns, open"
        assert "  Q: Where do I live?" in lines and "  A: You live in Lisbon." in lines
        assert lines.index("  Q: Where do I live?") < lines.index("  Q: Any plans?")
        assert re.search(r"^\[2\] \d{4}-\d\d-\d\d \d\d:\d\d  success$", out, re.M)

        code, out, _ = await run_memory(transport, "conversation", "list", *where)
        assert out.splitlines()[0].split()[:2] == ["ID", "TURNS"]
        [row] = rows(out)
        assert row[0] == "trip" and row[1].split()[0] == "2" and "open" in row[1]

        code, out, _ = await run_memory(transport, "conversation", "end", "trip", *where)
        assert (code, out) == (0, "ended conversation trip after 2 turns\n")
        code, out, _ = await run_memory(
            transport, "conversation", "show", "trip", "--last", "1", *where
        )
        assert "2 turns, ended (explicit)" in out.splitlines()[0]
        assert "Where do I live?" not in out and "  Q: Any plans?" in out

        code, out, err = await run_memory(transport, "conversation", "show", "nope", *where)
        assert code == 1 and out == ""
        assert "no conversation nope in collection default, user bob" in err
        code, _, err = await run_memory(transport, "conversation", "end", "nope", *where)
        assert code == 1 and "conversation-memory error (not-found)" in err


async def react_mem(*argv: str) -> tuple[int, str, str]:
    """The installed command line, in a subprocess."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "react_mem.cli",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_command_line_reaches_a_service_and_exits_1_without_a_stack(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with memory_service(
        FactMemoryProcessor, FactResponse, "fact-memory", transport, tmp_path, unique
    ) as service:
        await service.ask(
            FactRequest(operation="store", facts=[FactInput(content="Dana likes jazz.")]),
            f"cli-{unique}",
        )
        bus = cli_bus_args(transport, broker.url)
        argv = ["memory", "facts", "list", *bus, "--workspace", f"cli-{unique}"]
        code, out, err = await react_mem(*argv, "--flow", "f1")
        assert code == 0, err
        assert rows(out)[0][1] == "Dana likes jazz."

    code, out, err = await react_mem("ask", "Hello?", "--state-dir", str(tmp_path / "none"))
    assert code == 1 and out == ""
    assert "no broker is running" in err and "react-mem up" in err


async def test_memory_facts_history_shows_what_an_update_superseded(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    where = ["--workspace", f"cli-{unique}", "--flow", "f1", "--user", "ann"]
    async with memory_service(
        FactMemoryProcessor, FactResponse, "fact-memory", transport, tmp_path, unique
    ) as service:
        ids = []
        for content in ("I live in Berlin.", "I moved to Paris."):
            stored = await service.ask(
                FactRequest(operation="store", user="ann", facts=[FactInput(content=content)]),
                f"cli-{unique}",
            )
            ids.append(stored.stored[0].id)
        berlin, paris = ids
        code, out, err = await run_memory(transport, "facts", "history", berlin, *where)
        assert code == 0, err
        assert out.splitlines()[0].split() == ["ID", "STATE", "FROM", "UNTIL", "CONTENT"]
        lines = out.splitlines()[1:]
        assert [line.split()[:2] for line in lines] == [[berlin, "earlier"], [paris, "current"]]
        assert lines[0].endswith("I live in Berlin.") and lines[1].endswith("I moved to Paris.")
        code, out, _ = await run_memory(transport, "facts", "list", *where)
        assert [row[0] for row in rows(out)] == [paris]  # the earlier value is out of the list
        code, out, _ = await run_memory(transport, "facts", "history", paris, "--json", *where)
        assert [f["id"] for f in json.loads(out)["facts"]] == [berlin, paris]
