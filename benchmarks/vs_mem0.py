"""react-mem and mem0 side by side on the same data: recall@5/@10, search p50/p99, ingest rate.

mem0 (``MEM0`` below, the newest release that installs here) runs in a virtual environment
of its own, made once by this script at ``.venv-mem0`` (CPU torch first, as
``scripts/setup`` does, then mem0 and sentence-transformers pinned), as a child process
(``benchmarks/mem0_worker.py``, JSON lines on its stdin/stdout): mem0 is never a dependency
of react-mem. mem0 keeps its local defaults (Qdrant's local on-disk mode, SQLite history;
no BM25 or entity boosts, which need extras that download models at run time) with its
Hugging Face embedder given react-mem's on-disk all-MiniLM-L6-v2, and adds with
``infer=False``: mem0's raw-memory mode, each text stored as given, no LLM. react-mem is the
fact-memory service on an embedded broker, stored and asked over the bus as
``locomo_recall.py`` does, with its default ranking (hybrid) and embedding backend.

The two are interleaved: each batch of ``--batch`` items and each question goes to one, then
the other (the order alternating), so the machine's load falls on both alike. Ingest rate is
items over the time spent storing; search latency is per question, through the bus for
react-mem (query embedding included) and inside the worker for mem0 (the pipe not counted);
recall@k counts a question when every evidence item is among the top k. Searches are
repeated ``--runs`` times; the p50/p99 printed are the medians over the runs. Datasets: the
LoCoMo dev set (read from ``../shared/eval/locomo-dev.json`` as ``locomo_recall.py`` does;
skipped when absent) and generated facts (``generated_facts.py``) at each of ``--sizes``.
``--mem0-budget`` caps mem0's ingest time per dataset: past it, mem0 stops ingesting, its
rate is the one measured and its full ingest time is printed as an extrapolation, and its
recall is not given (its store is partial). Both processes run with one OMP/torch thread.

    OMP_NUM_THREADS=1 python benchmarks/vs_mem0.py --sizes 10k,100k --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generated_facts import generate
from benchmarks.locomo_recall import DEFAULT_DATA, KS, fact_memory, turns
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.clients.facts import FactClient
from react_mem.embedding.base import DEFAULT_BACKEND
from react_mem.embedding.sentence import model_path
from react_mem.schema.facts import FactInput
from react_mem.schema.scope import Scope

ROOT = Path(__file__).resolve().parents[1]
MEM0 = "mem0ai==2.2.1"
#: What the venv gets after CPU torch (which comes first, so nothing pulls a CUDA build).
TORCH = "torch==2.13.0"
PACKAGES = (MEM0, "sentence-transformers==6.2.0")
VENV = ROOT / ".venv-mem0"
WORKER = ROOT / "benchmarks" / "mem0_worker.py"
MODEL = "all-MiniLM-L6-v2"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def mem0_python(venv: Path = VENV) -> Path:
    """The venv's interpreter, the venv made first if it is missing or pinned differently."""
    python, stamp = venv / "bin" / "python", venv / "react-mem-pins.txt"
    pins = "\n".join((TORCH, *PACKAGES))
    if stamp.is_file() and stamp.read_text() == pins and python.exists():
        return python
    print(f"making {venv.name} for mem0 (once): {TORCH}, {', '.join(PACKAGES)}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    index = os.environ.get("TORCH_INDEX_URL")  # as scripts/setup: where PyPI's torch is CUDA
    subprocess.run([*pip, TORCH, *(["--index-url", index] if index else [])], check=True)
    subprocess.run([*pip, *PACKAGES], check=True)
    stamp.write_text(pins)
    return python


class WorkerError(RuntimeError):
    """The mem0 worker failed a request or went away."""


class Worker:
    """A ``mem0_worker.py`` process: one request line out, one answer line back."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float = 600) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=self.env,
                limit=1 << 24,
            )
        await asyncio.wait_for(self._answer(), timeout)  # {"ready": pid}, once mem0 is built

    async def _answer(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.is_file() else ""
            raise WorkerError(f"mem0 worker exited:\n{tail}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise WorkerError(answer["error"])
        return answer

    async def call(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        await self.proc.stdin.drain()
        return await self._answer()

    async def add(self, scope: str, items: list[tuple[str, str]]) -> float:
        """Seconds mem0 spent adding ``(key, text)`` items."""
        answer = await self.call(
            {"op": "add", "scope": scope, "items": [{"key": k, "text": t} for k, t in items]}
        )
        return float(answer["seconds"])

    async def search(self, scope: str, query: str, k: int) -> tuple[list[str], float]:
        answer = await self.call({"op": "search", "scope": scope, "query": query, "k": k})
        return [str(key) for key in answer["keys"]], float(answer["seconds"])

    async def close(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"op": "close"}\n')
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


@dataclass
class Dataset:
    name: str
    #: Scope name -> its items (each a key and the fact react-mem stores; mem0 gets its text).
    scopes: dict[str, list[tuple[str, FactInput]]]
    #: (scope, question, evidence keys)
    questions: list[tuple[str, str, list[str]]]


def locomo(path: Path) -> Dataset | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    scopes: dict[str, list[tuple[str, FactInput]]] = {}
    questions = []
    for sample in data:
        scope = f"locomo-{sample['sample_id']}"
        scopes[scope] = [(str(f.metadata["dia_id"]), f) for f in turns(sample)]
        questions += [
            (scope, qa["question"], list(qa["evidence"]))
            for qa in sample["qa"]
            if qa.get("evidence") and "answer" in qa  # as locomo_recall.py counts them
        ]
    turns_n = sum(map(len, scopes.values()))
    return Dataset(f"LoCoMo dev ({len(data)} conversations, {turns_n} turns)", scopes, questions)


def generated(count: int, questions: int, whole_people: bool) -> Dataset:
    facts, asked = generate(count, questions, whole_people=whole_people)
    items = [(f.key, FactInput(content=f.text, metadata={"key": f.key})) for f in facts]
    scope = f"facts-{count}"
    return Dataset(
        f"generated facts, {count:,} in one scope"
        + ("" if whole_people else ", spread over people"),
        {scope: items},
        [(scope, q.text, [q.answer]) for q in asked],
    )


@dataclass
class Side:
    items: int = 0
    seconds: float = 0.0
    hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    #: Per run, each question's search seconds.
    runs: list[list[float]] = field(default_factory=list)

    def count(self, found: list[str], evidence: list[str]) -> None:
        for k in KS:
            self.hits[k] += all(e in found[:k] for e in evidence)

    def percentile(self, q: float) -> float:
        """Median over the runs of each run's ``q`` percentile, in ms."""
        values = [sorted(r)[min(len(r) - 1, int(len(r) * q))] for r in self.runs if r]
        return statistics.median(values) * 1000 if values else float("nan")


@dataclass
class Outcome:
    dataset: Dataset
    react: Side
    mem0: Side
    #: Items mem0 was given when its ingest budget ran out (0: it took everything).
    mem0_partial: int = 0


async def compare(
    dataset: Dataset, react: FactClient, mem0: Worker, args: argparse.Namespace
) -> Outcome:
    out = Outcome(dataset, Side(), Side())
    total, step = sum(map(len, dataset.scopes.values())), 0
    for scope, items in dataset.scopes.items():
        for start in range(0, len(items), args.batch):
            batch = items[start : start + args.batch]
            for name in ("react", "mem0")[:: 1 if step % 2 == 0 else -1]:
                if name == "react":
                    started = time.perf_counter()
                    await react.store(Scope("bench", scope), [fact for _, fact in batch])
                    out.react.seconds += time.perf_counter() - started
                    out.react.items += len(batch)
                elif not out.mem0_partial:
                    texts = [(key, fact.content) for key, fact in batch]
                    out.mem0.seconds += await mem0.add(scope, texts)
                    out.mem0.items += len(batch)
                    over = args.mem0_budget and out.mem0.seconds > args.mem0_budget
                    if over and out.mem0.items < total:
                        out.mem0_partial = out.mem0.items
            step += 1
            if step % 20 == 0:
                print(f"    ingested {out.react.items:,}/{total:,}", flush=True)
    scope, question, _ = dataset.questions[0]  # one untimed search each: lazy loading
    await react.retrieve(Scope("bench", scope), question, top_k=max(KS))
    await mem0.search(scope, question, max(KS))
    for run in range(args.runs):
        for side in (out.react, out.mem0):
            side.runs.append([])
        for i, (scope, question, evidence) in enumerate(dataset.questions):
            where = Scope("bench", scope)
            for name in ("react", "mem0")[:: 1 if (i + run) % 2 == 0 else -1]:
                if name == "react":
                    started = time.perf_counter()
                    hits = await react.retrieve(where, question, top_k=max(KS))
                    out.react.runs[-1].append(time.perf_counter() - started)
                    found = [str(h.metadata.get("dia_id", h.metadata.get("key", ""))) for h in hits]
                    if run == 0:
                        out.react.count(found, evidence)
                else:
                    found, seconds = await mem0.search(scope, question, max(KS))
                    out.mem0.runs[-1].append(seconds)
                    if run == 0:
                        out.mem0.count(found, evidence)
    return out


def table(out: Outcome) -> str:
    n, react, mem0 = len(out.dataset.questions), out.react, out.mem0
    rows = [
        f"{out.dataset.name}, {n} questions, {len(react.runs)} search run(s),"
        f" load average {os.getloadavg()[0]:.1f}",
        f"  {'':<18}{'react-mem':>11}{'mem0':>11}{'react-mem x':>14}",
    ]
    for k in KS:
        r, m = react.hits[k] / n, mem0.hits[k] / n
        if out.mem0_partial:
            rows.append(f"  {f'recall@{k}':<18}{r:>11.3f}{'-':>11}{'-':>14}")
        else:
            rows.append(f"  {f'recall@{k}':<18}{r:>11.3f}{m:>11.3f}{r / m if m else 0:>13.2f}x")
    for label, q in (("search p50 (ms)", 0.5), ("search p99 (ms)", 0.99)):
        r, m = react.percentile(q), mem0.percentile(q)
        rows.append(f"  {label:<18}{r:>11.1f}{m:>11.1f}{m / r:>13.2f}x")
    r, m = react.items / react.seconds, mem0.items / mem0.seconds
    rows.append(f"  {'ingest (items/s)':<18}{r:>11.1f}{m:>11.1f}{r / m:>13.2f}x")
    rows.append("  (react-mem x: how many times better react-mem is; recall and rate over mem0's,")
    rows.append("   latency mem0's over react-mem's)")
    if out.mem0_partial:
        total = sum(map(len, out.dataset.scopes.values()))
        rows.append(
            f"  mem0 stopped at its ingest budget after {out.mem0_partial:,} of {total:,} items"
            f" ({mem0.seconds:.0f} s); EXTRAPOLATED at the measured rate, all {total:,} would"
            f" take {total / m / 60:.0f} min. Its search latency is over the partial store;"
            " its recall is not given."
        )
    return "\n".join(rows)


def sizes(text: str) -> list[int]:
    """``"10k,100k"`` -> ``[10000, 100000]``."""
    out = []
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        out.append(int(float(part[:-1]) * 1000) if part.endswith("k") else int(part))
    return out


async def run(args: argparse.Namespace, url: str, tmp: Path, python: Path) -> None:
    datasets: list[Dataset] = []
    if not args.no_locomo:
        found = locomo(args.data)
        if found is None:
            print(f"no LoCoMo data at {args.data}; LoCoMo skipped")
        else:
            datasets.append(found)
    datasets += [generated(n, args.questions, not args.spread) for n in sizes(args.sizes)]
    env = {**os.environ, **ONE_THREAD, "MEM0_TELEMETRY": "false", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "OPENAI_API_KEY": "unused-infer-false"}  # fmt: skip
    model = str(model_path(MODEL))
    for i, dataset in enumerate(datasets):
        print(f"\n{dataset.name}: ingesting both, interleaved", flush=True)
        here = tmp / f"d{i}"
        (here / "mem0").mkdir(parents=True)
        worker = Worker(
            [str(python), str(WORKER), model, str(here / "mem0")],
            {**env, "MEM0_DIR": str(here / "mem0" / "home")},
            tmp / "mem0-worker.log",
        )
        await worker.start()
        try:
            async with fact_memory(
                url, here, args.backend, max_facts_per_scope=1_000_000, sweep_interval=3600
            ) as react:
                outcome = await compare(dataset, react, worker, args)
        finally:
            await worker.close()
        print(table(outcome), flush=True)


def main() -> None:
    if os.environ.get("OMP_NUM_THREADS") != "1":  # before torch/onnxruntime load: run again
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **ONE_THREAD})
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo dev JSON")
    parser.add_argument("--no-locomo", action="store_true", help="generated facts only")
    parser.add_argument("--sizes", default="10k,100k", help="generated fact counts ('' none)")
    parser.add_argument("--questions", type=int, default=500, help="per generated size")
    parser.add_argument(
        "--spread", action="store_true", help="one fact per person mostly (recall saturates)"
    )
    parser.add_argument("--runs", type=int, default=3, help="search passes (medians printed)")
    parser.add_argument("--batch", type=int, default=64, help="items per ingest batch")
    parser.add_argument(
        "--mem0-budget", type=float, default=0, help="mem0 ingest seconds per dataset (0: all)"
    )
    parser.add_argument("--venv", type=Path, default=VENV, help="mem0's virtual environment")
    args = parser.parse_args()
    args.backend = DEFAULT_BACKEND
    python = mem0_python(args.venv)
    print(f"mem0: {MEM0} (infer=False: raw-memory mode, no LLM), local Qdrant, {MODEL} on torch")
    print(f"react-mem: fact memory over the bus, hybrid ranking, {MODEL} on {args.backend}")
    with (
        tempfile.TemporaryDirectory(prefix="vs-mem0-") as tmp,
        EmbeddedBroker(Path(tmp) / "broker") as broker,
    ):
        asyncio.run(run(args, broker.url, Path(tmp), python))


if __name__ == "__main__":
    main()
