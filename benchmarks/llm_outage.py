"""What one ask costs when the LLM is down: HTTP calls to the LLM and seconds until the
caller hears anything, on the real stack with the processors' default settings.

One process: an embedded broker, the real OpenAI-compatible text-completion processor and
the real agent (memory off, no tools), and the OpenAI-compatible test server from
``tests/support`` that either answers every request with HTTP 500 or holds every request
unanswered (a hung model server). One ``AgentRequest`` per case; the caller waits up to
``--wait`` seconds per message. Calls are counted when the caller's wait ends and again
``--settle`` seconds later (calls the stack goes on making for nobody).

    python benchmarks/llm_outage.py                      # both cases, default settings
    python benchmarks/llm_outage.py --case hang --wait 900 --llm-deadline 60
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.errors import RequestTimeout
from react_mem.schema import AgentRequest
from tests.support.llm_agent import llm_agent
from tests.support.openai_server import OpenAIServer


async def one_case(url: str, root: Path, case: str, args: argparse.Namespace) -> dict[str, Any]:
    server = OpenAIServer()
    server.start()
    if case == "500":
        server.fail(500, times=1_000_000)
    else:
        server.hanging = True
    transport = PulsarTransport(PulsarOptions(url=url))
    await transport.connect()
    agent: dict[str, Any] = {}
    if args.llm_deadline is not None:
        agent["llm_deadline"] = args.llm_deadline
    unique = uuid.uuid4().hex[:10]
    try:
        async with llm_agent(transport, root, unique, server, agent=agent) as stack:
            started = time.monotonic()
            first: float | None = None
            outcome = "silence"
            request = AgentRequest(question="What is the capital of France?")
            stream = stack.client.stream(request, last=lambda r: r.end_of_dialog, timeout=args.wait)
            try:
                async for response in stream:
                    first = first if first is not None else time.monotonic() - started
                    if response.end_of_dialog or response.error is not None:
                        outcome = response.error.type if response.error else response.message_type
                        break
            except RequestTimeout:
                outcome = f"silence (caller gave up after {args.wait:g}s)"
            ended = time.monotonic() - started
            calls = len(server.requests)
            await asyncio.sleep(args.settle)
            return {
                "case": case,
                "first_reply_s": first,
                "ended_s": ended,
                "outcome": outcome,
                "calls": calls,
                "calls_after_settle": len(server.requests),
            }
    finally:
        server.stop()
        await transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["500", "hang", "both"], default="both")
    parser.add_argument("--wait", type=float, default=900.0, help="caller's wait per message")
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument(
        "--llm-deadline", type=float, default=None, help="the agent's llm_deadline setting"
    )
    args = parser.parse_args()
    cases = ["500", "hang"] if args.case == "both" else [args.case]
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        for case in cases:
            root = Path(tmp) / case
            root.mkdir()
            row = asyncio.run(one_case(broker.url, root, case, args))
            first = row["first_reply_s"]
            print(
                f"{row['case']:>5}: first reply after "
                f"{'-' if first is None else f'{first:.1f}s'}, "
                f"caller done after {row['ended_s']:.1f}s ({row['outcome']}); "
                f"LLM HTTP calls {row['calls']} "
                f"({row['calls_after_settle']} after {args.settle:g}s more)",
                flush=True,
            )


if __name__ == "__main__":
    main()
