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
from pathlib import Path
from typing import Any

import pytest

from react_mem.bus.transport import Transport
from tests.support.recording import eventually
from tests.support.trustgraph import trustgraph_agent, trustgraph_backend, trustgraph_config
from tests.support.trustgraph_flow import (
    BLUEPRINT,
    blueprint_stack,
    flow_config,
    flow_request,
    librarian,
    triples_store,
)

pytestmark = pytest.mark.broker

ANSWER = "Thought: I can answer that.\nFinal Answer: Paris is the capital of France."
#: What a TrustGraph client allows an answer (AgentClient's timeout as the issue's operator set it).
ANSWER_WITHIN = 5.0


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
            blueprint_stack(transport, tmp_path, unique, workspace, [flow], answer=ANSWER)
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
        # The operator's contract is the client's own timeout above (a librarian on the
        # answer's path made it 10 s and more); the time is a figure, not an assertion.
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

        # React-mem's receive loops ("<id>--<workspace>--<flow>--<spec>"), clients ("rr:<its
        # response queue>") and after-reply work ("<id> <workspace>/<flow>:<work>") are tasks
        # named for the flow: once none is left, nothing can retry, log or save for it (no
        # pause to watch for them). The scripted LLM, a test double, is not react-mem's.
        ours = tuple(f"{p.id}{sep}" for p in processors.values() for sep in ("--", " "))

        def working_for_the_flow() -> list[str]:
            names = [t.get_name() for t in asyncio.all_tasks()]
            return [n for n in names if flow in n and n.startswith(("rr:", *ours))]

        try:
            await eventually(lambda: not working_for_the_flow(), timeout=30)
        except AssertionError:
            raise AssertionError(f"still working for the flow: {working_for_the_flow()}") from None
        noisy = [r.getMessage() for r in caplog.records if "receive failed" in r.getMessage()]
        assert noisy == []
        if books is not None:
            assert len(books.documents) == saved, "work for a stopped flow went on"
