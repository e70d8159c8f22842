"""Retrieval quality on LoCoMo through the fact-memory service (recall@k, all-evidence).

Every turn of a conversation is stored as one fact (speaker and session date prefixed,
``dia_id`` kept in metadata; near-duplicate merging off, so each turn stays one memory) in
a collection of its own; each question with evidence retrieves the top k over the bus, and
counts as a hit when every evidence ``dia_id`` is among them. Reports k = 5 and 10 and the
latency of each retrieval. The data (CC BY-NC 4.0, Maharana et al., ACL 2024) is read from
``../shared/eval/locomo-dev.json`` at run time and never copied; without it, this exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, get_args

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.embedding.base import DEFAULT_BACKEND, Backend
from react_mem.schema.facts import FactInput, FactRequest, FactResponse

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo-dev.json"
KS = (5, 10)


def turns(sample: dict[str, Any]) -> list[FactInput]:
    conversation, facts = sample["conversation"], []
    for key, session in conversation.items():
        if key.startswith("session_") and isinstance(session, list):
            date = conversation.get(f"{key}_date_time", "")
            for turn in session:
                text = f"{turn['speaker']} ({date}): {turn['text']}"
                facts.append(FactInput(content=text, metadata={"dia_id": turn["dia_id"]}))
    return facts


async def evaluate(data: list[dict[str, Any]], url: str, tmp: Path, backend: Backend) -> None:
    bus = PulsarTransport(PulsarOptions(url=url))
    await bus.connect()
    topics = {
        "request": "request:tg:fact-memory:eval:f",
        "response": "response:tg:fact-memory:eval:f",
    }
    flows = tmp / "flows.yaml"
    flows.write_text(json.dumps({"eval": {"processor:fact-eval": {"f": {"topics": topics}}}}))
    service = FactMemoryProcessor(
        FactMemoryProcessor.Settings.load(
            {
                "id": "fact-eval",
                "flows": flows,
                "data_dir": tmp / "facts",
                "state_dir": tmp,
                "near_duplicate_threshold": 1.0,
                "embedding_backend": backend,
                "concurrency": 4,
            }
        ),
        bus,
    )
    await service.start()
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        bus, topics["request"], topics["response"], FactResponse, timeout=120
    )
    await client.start()
    hits, questions, latencies = dict.fromkeys(KS, 0), 0, []
    try:
        for sample in data:
            collection, facts = f"locomo-{sample['sample_id']}", turns(sample)
            for start in range(0, len(facts), 64):
                reply = await client.request(
                    FactRequest(
                        operation="store", collection=collection, facts=facts[start : start + 64]
                    )
                )
                if reply.error:
                    sys.exit(f"store failed: {reply.error.message}")
            for qa in sample["qa"]:
                if not qa.get("evidence") or "answer" not in qa:
                    continue
                started = time.perf_counter()
                reply = await client.request(
                    FactRequest(
                        operation="retrieve",
                        collection=collection,
                        query=qa["question"],
                        top_k=max(KS),
                    )
                )
                latencies.append(time.perf_counter() - started)
                found = [f.metadata.get("dia_id") for f in reply.facts]
                questions += 1
                for k in KS:
                    hits[k] += all(e in found[:k] for e in qa["evidence"])
            print(f"  {collection}: {len(facts)} turns stored", flush=True)
    finally:
        await client.close()
        await service.stop()
        await bus.close()
    latencies.sort()
    print(
        f"{questions} questions over {len(data)} conversations: "
        + ", ".join(f"recall@{k} {hits[k] / questions:.3f}" for k in KS)
    )
    print(
        f"retrieval latency through the bus: p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--backend", choices=get_args(Backend), default=DEFAULT_BACKEND, help="embedding backend"
    )
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"no LoCoMo data at {args.data}; nothing to evaluate")
        return
    data = json.loads(args.data.read_text())
    with (
        tempfile.TemporaryDirectory(prefix="locomo-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker") as broker,
    ):
        print(f"embedding backend: {args.backend}")
        asyncio.run(evaluate(data, broker.url, Path(tmp), args.backend))


if __name__ == "__main__":
    main()
