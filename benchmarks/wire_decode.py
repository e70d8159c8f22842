"""CPU time to decode the wire messages an ask moves most (bytes to a validated model).

Every message on the bus is decoded by ``WireModel.decode``: JSON parsing, the payload
checks, the null-means-default pass and pydantic validation. Process CPU time, best of
three runs of ``--repeat`` decodes each, so a busy machine inflates it little; run it at
two commits to compare them.

    python benchmarks/wire_decode.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem.schema import AgentRequest, AgentResponse, AgentStep, WireModel
from react_mem.schema.facts import Fact, FactResponse

FACT = Fact(
    id="6f1c1f0e-5b7a-4d0e-9a43-3f7f1e2a9c10",
    content="Carol has a pet tortoise named Sheldon.",
    workspace="default",
    collection="default",
    user="ada",
    created_at=1.0,
    updated_at=1.0,
    importance=0.5,
    confidence=0.7,
    content_hash="0" * 64,
)
STEP = AgentStep(thought="look it up", action="knowledge", observation="o" * 200)
MESSAGES: list[tuple[str, type[WireModel], WireModel]] = [
    (
        "agent request, 3 steps",
        AgentRequest,
        AgentRequest(question="Plan a weekend in Lisbon?", user="ada", history=[STEP] * 3),
    ),
    (
        "agent answer",
        AgentResponse,
        AgentResponse(message_type="answer", content="Sure.", end_of_dialog=True),
    ),
    ("fact response, 5 facts", FactResponse, FactResponse(facts=[FACT] * 5)),
    ("fact response, 20 facts", FactResponse, FactResponse(facts=[FACT] * 20)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1000)
    args = parser.parse_args()
    for name, cls, message in MESSAGES:
        data = message.encode()
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for _ in range(args.repeat):
                cls.decode(data)
            best = min(best, (time.process_time() - started) / args.repeat)
        print(f"{name} ({len(data):,} bytes): {best * 1e6:.0f} us")


if __name__ == "__main__":
    main()
