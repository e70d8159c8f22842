"""What a TrustGraph 2.11 operator does, end to end on the real broker: load react-mem's flow
blueprint, start a flow from it with TrustGraph's own flow service (``FlowConfig`` of
trustgraph-flow 2.11.1, through its config client and async backend), ask through the new
flow's ``agent`` interface with TrustGraph's ``AgentClient``, then stop the flow.

Run with no librarian, with one that answers and with one that never does: the answer
never waits for provenance, provenance lands where TrustGraph's explainability reads it (the
flow's triples store; documents in the workspace's librarian), and a stopped flow stops all
of react-mem's work for it, quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Transport
from react_mem.config_service.service import ConfigServiceProcessor
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.runtime import resolve_processor
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema.services import LibrarianRequest, LibrarianResponse, Triples
from tests.support.recording import eventually
from tests.support.scripted_llm import ScriptedLLM, replies
from tests.support.trustgraph import trustgraph_agent, trustgraph_backend, trustgraph_config
from tests.support.trustgraph_flow import flow_config, flow_request

pytestmark = pytest.mark.broker

BLUEPRINT = Path(__file__).resolve().parent.parent / "config" / "trustgraph" / "flow-blueprint.json"
ANSWER = "Thought: I can answer that.\nFinal Answer: Paris is the capital of France."
#: What a TrustGraph client allows an answer (AgentClient's timeout as the issue's operator set it).
ANSWER_WITHIN = 5.0


class Librarian(Processor):
    """A test double of TrustGraph's librarian on its per-workspace queues: records every
    document; ``answering`` false leaves every request unanswered (a librarian that hangs)."""

    default_id: ClassVar[str] = "librarian"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry,
        answering: bool,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.answering = answering
        self.documents: list[LibrarianRequest] = []
        self.register_specification(
            ConsumerSpec(
                name="request", schema=LibrarianRequest, handler=self.on_request, response="response"
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=LibrarianResponse))

    async def on_request(self, request: LibrarianRequest, ctx: MessageContext) -> None:
        self.documents.append(request)
        if self.answering:
            await ctx.reply(LibrarianResponse())


def blueprint_processors() -> list[str]:
    """The react-mem processors of the blueprint's flow entries (``agent-mem:{id}`` ...)."""
    blueprint = json.loads(BLUEPRINT.read_text())
    return [key.split(":", 1)[0] for key in blueprint["flow"]]


@contextlib.asynccontextmanager
async def stack(
    transport: Transport, tmp_path: Path, unique: str, workspace: str, flow: str
) -> AsyncIterator[dict[str, Processor]]:
    """A config service and every processor of the blueprint, under the blueprint's ids, with
    no flow until TrustGraph's flow service starts one; a scripted LLM on the flow's
    text-completion queues (a TrustGraph deployment runs its own)."""
    registry = CollectorRegistry()
    started: list[Processor] = []

    async def start(processor: Processor) -> Processor:
        await processor.start()
        started.append(processor)
        return processor

    try:
        await start(
            ConfigServiceProcessor(
                ConfigServiceProcessor.Settings.load(
                    {"id": f"cfg-{unique}", "data_dir": tmp_path / "cfg"}
                ),
                transport,
                registry=registry,
            )
        )
        llm_flow = {
            "topics": {
                "request": f"request:tg:text-completion:{workspace}:{flow}",
                "response": f"response:tg:text-completion:{workspace}:{flow}",
            }
        }
        llm_flows = tmp_path / "llm.yaml"
        llm_flows.write_text(json.dumps({workspace: {f"processor:llm-{unique}": {flow: llm_flow}}}))
        await start(
            ScriptedLLM(
                ScriptedLLM.Settings.load({"id": f"llm-{unique}", "flows": llm_flows}),
                transport,
                registry=registry,
                script=replies(ANSWER),
            )
        )
        running: dict[str, Processor] = {}
        for name in blueprint_processors():
            cls = resolve_processor(name)
            values: dict[str, Any] = {"id": name, "config_timeout": 10}
            fields = cls.Settings.model_fields
            if "data_dir" in fields:
                values["data_dir"] = tmp_path / name
            if "state_dir" in fields:
                values["state_dir"] = tmp_path / name
            running[name] = await start(
                cls(cls.Settings.load(values), transport, registry=registry)
            )
        yield running
    finally:
        for processor in reversed(started):
            await processor.stop()


@contextlib.asynccontextmanager
async def librarian(
    transport: Transport, tmp_path: Path, workspace: str, *, answering: bool
) -> AsyncIterator[Librarian]:
    topics = {"request": f"request:tg:librarian:{workspace}", "response": f"response:tg:librarian:{workspace}"}
    flows = tmp_path / "librarian.yaml"
    flows.write_text(json.dumps({workspace: {"processor:librarian": {"default": {"topics": topics}}}}))
    double = Librarian(
        Librarian.Settings.load({"id": "librarian", "flows": flows}),
        transport,
        registry=CollectorRegistry(),
        answering=answering,
    )
    await double.start()
    try:
        yield double
    finally:
        await double.stop()


@contextlib.asynccontextmanager
async def triples_store(transport: Transport, queue: str, unique: str) -> AsyncIterator[list[Triples]]:
    """What TrustGraph's triples store would consume from the flow's explainability queue."""
    got: list[Triples] = []
    consumer = await transport.consumer(Queue.parse(queue), f"triples-store-{unique}")

    async def read() -> None:
        while True:
            delivery = await consumer.receive()
            got.append(Triples.decode(delivery.data))
            await consumer.ack(delivery)

    task = asyncio.create_task(read())
    try:
        yield got
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.close()


@pytest.mark.parametrize("library", ["none", "answering", "silent"])
async def test_a_flow_started_by_trustgraphs_flow_service_answers_and_stops_cleanly(
    broker: Any,
    transport: Transport,
    tmp_path: Path,
    unique: str,
    library: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from trustgraph.schema import AgentRequest as TgAgentRequest

    workspace, flow = f"ws-{unique}", f"flow-{unique}"
    triples_queue = f"flow:tg:triples-store:{workspace}:{flow}"
    async with contextlib.AsyncExitStack() as resources:
        processors = await resources.enter_async_context(
            stack(transport, tmp_path, unique, workspace, flow)
        )
        books = None
        if library != "none":
            books = await resources.enter_async_context(
                librarian(transport, tmp_path, workspace, answering=library == "answering")
            )
        provenance = await resources.enter_async_context(
            triples_store(transport, triples_queue, unique)
        )
        backend = await resources.enter_async_context(trustgraph_backend(broker.url, transport))
        config = await resources.enter_async_context(trustgraph_config(backend))
        service = flow_config(config, backend)

        # The operator's steps: load the blueprint, start a flow from it.
        put = flow_request(
            operation="put-blueprint",
            blueprint_name="react-mem",
            blueprint_definition=BLUEPRINT.read_text(),
        )
        assert (await service.handle(put, workspace)).error is None
        start = flow_request(
            operation="start-flow",
            blueprint_name="react-mem",
            flow_id=flow,
            description="react-mem, started by TrustGraph's flow service",
        )
        started = time.monotonic()
        assert (await service.handle(start, workspace)).error is None
        interfaces = json.loads(await config.get(workspace, "flow", flow))["interfaces"]
        assert interfaces["agent"] == {
            "request": f"request:tg:agent:{workspace}:{flow}",
            "response": f"response:tg:agent:{workspace}:{flow}",
        }
        await eventually(
            lambda: all((workspace, flow) in p.flows for p in processors.values()), timeout=30
        )

        # Ask as a TrustGraph client does: the answer comes within its timeout.
        async with trustgraph_agent(backend, interfaces["agent"]) as agent:
            answers: list[str] = []

            async def recipient(response: Any) -> bool:
                if response.message_type == "answer" and response.content:
                    answers.append(response.content)
                return bool(response.end_of_dialog)

            request = TgAgentRequest(question="What is the capital of France?")
            await agent.request(request, recipient=recipient, timeout=ANSWER_WITHIN)
        answered = time.monotonic() - started
        assert answers == ["Paris is the capital of France."]
        logging.getLogger(__name__).info("answered %.2f s after start-flow", answered)

        # Provenance lands where TrustGraph's explainability reads it.
        def landed() -> set[str]:
            return {t.metadata.id for t in provenance if t.metadata is not None}

        await eventually(lambda: any(i.endswith("/final") for i in landed()), timeout=20)
        if books is not None:
            await eventually(
                lambda: any(d.document_id.endswith("/answer") for d in books.documents), timeout=20
            )

        # Stopping the flow stops react-mem's work for it, quietly.
        caplog.clear()
        caplog.set_level(logging.WARNING)
        stop = flow_request(operation="stop-flow", flow_id=flow)
        assert (await service.handle(stop, workspace)).error is None
        await eventually(
            lambda: not any((workspace, flow) in p.flows for p in processors.values()),
            timeout=30,
        )
        saved = len(books.documents) if books is not None else 0
        await asyncio.sleep(1.5)  # long enough for a retry loop to show itself
        noisy = [r.getMessage() for r in caplog.records if "receive failed" in r.getMessage()]
        assert noisy == []
        if books is not None:
            assert len(books.documents) == saved, "work for a stopped flow went on"
