"""mem0's side of ``vs_mem0.py``: one ``mem0.Memory`` in its own process and virtual
environment, driven by JSON lines on stdin, one answer line per request on stdout.

Requests (``op``): ``add`` ``{"scope", "items": [{"key", "text"}]}`` adds each item as one
memory (``infer=False``: mem0's raw-memory mode, no LLM), ``key`` kept in its metadata;
``search`` ``{"scope", "query", "k"}`` answers the keys of the top ``k``; ``close`` ends.
Every answer carries ``seconds``, the time spent inside mem0 (so the pipe is not counted
against it), or ``error``. This file imports nothing of react-mem: it runs where mem0 is
installed. mem0 is configured as its local defaults (Qdrant on local disk, SQLite history),
with the Hugging Face embedder given the on-disk model react-mem uses.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, Any, Protocol


class Memory(Protocol):
    def add(self, messages: Any, **kwargs: Any) -> Any: ...

    def search(self, query: str, **kwargs: Any) -> Any: ...


def handle(memory: Memory, request: dict[str, Any]) -> dict[str, Any]:
    """One request's answer (mem0's own failures come back as ``error``)."""
    op, started = request.get("op"), time.perf_counter()
    if op == "add":
        for item in request["items"]:
            memory.add(
                [{"role": "user", "content": item["text"]}],
                user_id=request["scope"],
                metadata={"key": item["key"]},
                infer=False,
            )
        return {"count": len(request["items"]), "seconds": time.perf_counter() - started}
    if op == "search":
        found = memory.search(
            request["query"], top_k=request["k"], filters={"user_id": request["scope"]}
        )
        keys = [(hit.get("metadata") or {}).get("key", "") for hit in found["results"]]
        return {"keys": keys, "seconds": time.perf_counter() - started}
    raise ValueError(f"unknown op {op!r}")


def serve(memory: Memory, lines: IO[str], out: IO[str]) -> None:
    """Answer each request line until ``close`` or the end of input."""
    for line in lines:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("op") == "close":
            break
        try:
            answer = handle(memory, request)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def build(model: str, data_dir: str) -> Memory:
    """mem0 with its local defaults, the embedder pointed at ``model`` (a local directory)."""
    import torch
    from mem0 import Memory as Mem0

    torch.set_num_threads(1)
    return Mem0.from_config(
        {
            "embedder": {
                "provider": "huggingface",
                "config": {"model": model, "model_kwargs": {"device": "cpu"}},
            },
            "vector_store": {
                "provider": "qdrant",  # mem0's default store, on local disk
                "config": {"path": f"{data_dir}/qdrant", "embedding_model_dims": 384},
            },
            "history_db_path": f"{data_dir}/history.db",
        }
    )


def main() -> None:
    model, data_dir = sys.argv[1], sys.argv[2]
    memory = build(model, data_dir)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything mem0 prints must not mix with the answers
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    out.flush()
    serve(memory, sys.stdin, out)


if __name__ == "__main__":
    main()
