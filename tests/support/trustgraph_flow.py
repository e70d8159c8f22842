"""TrustGraph 2.11.1's flow service, unchanged: ``FlowConfig`` (``flow/service/flow.py`` of
trustgraph-flow), loaded from the source archive ``scripts/setup`` keeps in the virtualenv.

trustgraph-flow's runtime dependencies (model SDKs, databases) are far too heavy for the test
extra, and that one module needs only ``trustgraph.schema`` (trustgraph-base) and the standard
library, so it is loaded alone. It drives flows as a TrustGraph operator does: blueprints and
flows through TrustGraph's config client, topics through TrustGraph's async backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import tarfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import ModuleType
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
from tests.support.scripted_llm import ScriptedLLM, replies

BLUEPRINT = Path(__file__).resolve().parents[2] / "config" / "trustgraph" / "flow-blueprint.json"
ARCHIVES = Path(sys.prefix) / "share" / "trustgraph"
MODULE = "trustgraph/flow/service/flow.py"


def flow_service_module() -> ModuleType:
    """``trustgraph.flow.service.flow`` of trustgraph-flow 2.11.1 (skips the test when the
    archive is missing: run ``scripts/setup test``)."""
    name = "trustgraph_flow_2_11_1_flow"
    if name in sys.modules:
        return sys.modules[name]
    archives = sorted(ARCHIVES.glob("trustgraph_flow-2.11.1.tar.gz"))
    if not archives:
        pytest.skip("trustgraph-flow 2.11.1's source is not here: run scripts/setup test")
    with tarfile.open(archives[0]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith(MODULE))
        handle = archive.extractfile(member)
        assert handle is not None
        source = handle.read().decode("utf-8")
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{archives[0].name}/{member.name}", "exec"), module.__dict__)
    sys.modules[name] = module
    return module


def flow_config(config_client: Any, backend: Any) -> Any:
    """TrustGraph's ``FlowConfig`` over its config client and async backend."""
    return flow_service_module().FlowConfig(config_client, backend)


def flow_request(**fields: Any) -> Any:
    """TrustGraph's ``FlowRequest`` (what its gateway sends to the flow service)."""
    from trustgraph.schema import FlowRequest

    return FlowRequest(**fields)


class Librarian(Processor):
    """A test double of TrustGraph's librarian on its per-workspace queues: records every
    document; it answers those ``answers`` accepts and leaves the rest unanswered (a
    librarian that hangs)."""

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
        self.answers: Callable[[LibrarianRequest], bool] = lambda _: answering
        self.documents: list[LibrarianRequest] = []
        self.register_specification(
            ConsumerSpec(
                name="request",
                schema=LibrarianRequest,
                handler=self.on_request,
                response="response",
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=LibrarianResponse))

    async def on_request(self, request: LibrarianRequest, ctx: MessageContext) -> None:
        self.documents.append(request)
        if self.answers(request):
            await ctx.reply(LibrarianResponse(document_id=request.document_id))


def blueprint_processors() -> list[str]:
    """The react-mem processors of the blueprint's flow entries (``agent-mem:{id}`` ...)."""
    blueprint = json.loads(BLUEPRINT.read_text())
    return [key.split(":", 1)[0] for key in blueprint["flow"]]


@contextlib.asynccontextmanager
async def blueprint_stack(
    transport: Transport,
    tmp_path: Path,
    unique: str,
    workspace: str,
    flows: Sequence[str],
    *,
    answer: str,
) -> AsyncIterator[dict[str, Processor]]:
    """A config service and every processor of the blueprint, under the blueprint's ids, with
    no flow until TrustGraph's flow service starts one; a scripted LLM answering ``answer``
    on the text-completion queues of ``flows`` (a TrustGraph deployment runs its own)."""
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
            flow: {
                "topics": {
                    "request": f"request:tg:text-completion:{workspace}:{flow}",
                    "response": f"response:tg:text-completion:{workspace}:{flow}",
                }
            }
            for flow in flows
        }
        llm_flows = tmp_path / "llm.yaml"
        llm_flows.write_text(json.dumps({workspace: {f"processor:llm-{unique}": llm_flow}}))
        await start(
            ScriptedLLM(
                ScriptedLLM.Settings.load({"id": f"llm-{unique}", "flows": llm_flows}),
                transport,
                registry=registry,
                script=replies(answer),
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
    topics = {
        "request": f"request:tg:librarian:{workspace}",
        "response": f"response:tg:librarian:{workspace}",
    }
    flows = tmp_path / "librarian.yaml"
    flows.write_text(
        json.dumps({workspace: {"processor:librarian": {"default": {"topics": topics}}}})
    )
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
async def triples_store(
    transport: Transport, queue: str, unique: str
) -> AsyncIterator[list[Triples]]:
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
