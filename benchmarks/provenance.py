"""What provenance costs an answer: agent-mem in flows started by TrustGraph's own flow service
from ``config/trustgraph/flow-blueprint.json``, asked through TrustGraph's ``AgentClient``.

One process and broker, the blueprint's processors (agent, learner, memory services) and a
scripted LLM that answers at once, and three flows side by side:

- ``no-librarian``: the blueprint without the librarian's queues (nothing saves documents),
- ``silent``: a librarian on TrustGraph's queue that never answers,
- ``answering``: one that answers every save at once.

Asks go round-robin over the three flows, one at a time, so the machine's noise falls on
each alike. It prints p50/p99 per flow and the silent and answering librarians' p50 as a
ratio of the flow without one (before provenance went off the reply path, a silent
librarian held every answer for its 10 s timeout, per document).

    OMP_NUM_THREADS=1 python benchmarks/provenance.py
    OMP_NUM_THREADS=1 python benchmarks/provenance.py --asks 200 --broker-log warn
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from tests.support.recording import eventually
from tests.support.trustgraph import trustgraph_agent, trustgraph_backend, trustgraph_config
from tests.support.trustgraph_flow import (
    BLUEPRINT,
    blueprint_stack,
    flow_config,
    flow_request,
    librarian,
)

ANSWER = "Thought: I know this.\nFinal Answer: Paris is the capital of France."
FLOWS = ("no-librarian", "silent", "answering")


def without_librarian(text: str) -> str:
    blueprint = json.loads(text)
    for entry in blueprint["flow"].values():
        for spec in ("librarian-request", "librarian-response"):
            entry["topics"].pop(spec, None)
    return json.dumps(blueprint)


async def start_flows(service: Any, config: Any, workspace: str) -> dict[str, dict[str, str]]:
    """Each flow started from its blueprint; their agent interfaces."""
    text = BLUEPRINT.read_text()
    blueprints = {"with": text, "without": without_librarian(text)}
    for name, definition in blueprints.items():
        put = flow_request(
            operation="put-blueprint", blueprint_name=name, blueprint_definition=definition
        )
        assert (await service.handle(put, workspace)).error is None
    interfaces = {}
    for flow in FLOWS:
        start = flow_request(
            operation="start-flow",
            blueprint_name="without" if flow == "no-librarian" else "with",
            flow_id=flow,
            description=flow,
        )
        assert (await service.handle(start, workspace)).error is None
        interfaces[flow] = json.loads(await config.get(workspace, "flow", flow))["interfaces"][
            "agent"
        ]
    return interfaces


async def run(asks: int, broker_log: str) -> None:
    from trustgraph.schema import AgentRequest

    unique = uuid.uuid4().hex[:8]
    workspace = f"bench-{unique}"
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedBroker(Path(tmp) / "broker", log_level=broker_log) as broker,
    ):
        transport = PulsarTransport(PulsarOptions(url=broker.url, connect_timeout=10))
        await transport.connect()
        tmp_path = Path(tmp)
        async with contextlib.AsyncExitStack() as stack:
            processors = await stack.enter_async_context(
                blueprint_stack(transport, tmp_path, unique, workspace, FLOWS, answer=ANSWER)
            )
            # One librarian on the workspace's queue serves every flow of it: answering or not
            # is per flow here, so the double answers only the answering flow's documents.
            books = await stack.enter_async_context(
                librarian(transport, tmp_path, workspace, answering=False)
            )
            backend = await stack.enter_async_context(trustgraph_backend(broker.url, transport))
            config = await stack.enter_async_context(trustgraph_config(backend))
            interfaces = await start_flows(flow_config(config, backend), config, workspace)
            await eventually(
                lambda: all((workspace, f) in p.flows for p in processors.values() for f in FLOWS),
                timeout=60,
            )
            agents = {
                f: await stack.enter_async_context(trustgraph_agent(backend, interfaces[f]))
                for f in FLOWS
            }
            answering_sessions: set[str] = set()
            books.answers = lambda request: (
                request.document_id.split(":")[-1].split("/")[0] in (answering_sessions)
            )
            times: dict[str, list[float]] = {f: [] for f in FLOWS}

            async def ask(flow: str, question: str) -> None:
                session = str(uuid.uuid4())
                if flow == "answering":
                    answering_sessions.add(session)

                async def recipient(response: Any) -> bool:
                    return bool(response.end_of_dialog)

                began = time.perf_counter()
                request = AgentRequest(question=question, session_id=session)
                await agents[flow].request(request, recipient=recipient, timeout=60)
                times[flow].append(time.perf_counter() - began)

            for flow in FLOWS:  # warm each flow once
                await ask(flow, "warm-up")
            times = {f: [] for f in FLOWS}
            for i in range(asks):
                for flow in FLOWS:
                    await ask(flow, f"What is the capital of France? ({i})")
        await transport.close()

    def ms(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    base = statistics.median(times["no-librarian"])
    print(f"{'flow':<14} {'asks':>5} {'p50 ms':>8} {'p99 ms':>8} {'p50 / no-librarian':>19}")
    for flow in FLOWS:
        p50 = statistics.median(times[flow])
        print(
            f"{flow:<14} {len(times[flow]):>5} {1000 * p50:>8.1f} {ms(times[flow], 0.99):>8.1f}"
            f" {p50 / base:>19.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=100, help="asks per flow (default 100)")
    parser.add_argument("--broker-log", default="warn")
    args = parser.parse_args()
    asyncio.run(run(args.asks, args.broker_log))


if __name__ == "__main__":
    main()
