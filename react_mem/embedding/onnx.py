"""A sentence-transformers model run by ONNX Runtime: the same pipeline, 3-6x faster per query.

The model (transformer, pooling, normalisation: whatever its modules are) is exported once
with torch's exporter into a cache directory, optionally with dynamic int8 weights
(onnxruntime's quantizer, per channel), and reused by every later start. Texts are tokenised
by the model's own fast tokenizer (its ``tokenizer.json``) with its own length limit, and
torch is never loaded outside the exporting child; the fp32 graph gives the vectors
``SentenceTransformer.encode`` gives (cosine 1 - 1e-6); the int8 graph's are within cosine
≈0.99 of them (``tests/test_embedding.py`` checks both). Figures: ``benchmarks/embedding.py``.
The graph also returns the transformer's token embeddings, for pooling spans of a text from
its one run (:meth:`OnnxEncoder.encode_spans`, late chunking).

Nothing is downloaded: the export is a local conversion of the local model. The cache key
covers the model's files, the exporter settings and the torch and onnxruntime versions, and
files appear by atomic rename, so concurrent starts never read a half-written graph.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from react_mem.embedding.base import Spans
from react_mem.errors import ConfigurationError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

#: Bump when the export below changes what it writes (2: token embeddings as a second output).
EXPORT_VERSION = 2
OPSET = 17


def cache_dir() -> Path:
    """``REACT_MEM_CACHE_DIR``, else the user's cache directory, plus ``onnx``."""
    import platformdirs

    root = os.environ.get("REACT_MEM_CACHE_DIR") or platformdirs.user_cache_dir("react-mem")
    return Path(root) / "onnx"


def _key(model_dir: Path, quantized: bool) -> str:
    # Versions from package metadata: importing torch here would cost the process 400 MiB.
    exporter = f"{EXPORT_VERSION}/{OPSET}/{quantized}/{version('torch')}/{version('onnxruntime')}"
    digest = hashlib.sha256(exporter.encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(model_dir)}:{path.stat().st_size};".encode())
        with path.open("rb") as file:  # contents, not times: copies and reinstalls hit
            hashlib.file_digest(file, lambda: digest)
    return digest.hexdigest()[:24]


def graph(model_dir: Path, *, quantized: bool) -> Path:
    """The model's ONNX graph from the cache, exported (and quantized) first if absent.

    The export runs in a child process: torch's exporter fails in a process that has loaded
    pulsar-client's native library (as every service has), and the child's memory is
    returned when it exits.
    """
    name = "model-int8.onnx" if quantized else "model.onnx"
    path = cache_dir() / _key(model_dir, quantized) / name
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        done = Path(scratch) / name
        command = [sys.executable, "-m", __name__, str(model_dir), str(done)]
        if quantized:
            command.append("--int8")
        child = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0 or not done.is_file():
            said = child.stderr.strip().splitlines() or [f"exit status {child.returncode}"]
            raise RuntimeError(said[-1])
        os.replace(done, path)
    logger.info("exported %s to %s", model_dir, path)
    return path


def export(model_dir: Path, target: Path, *, quantized: bool) -> None:
    """Export the model at ``model_dir`` to ``target`` (the child process's work)."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True).eval()
    exported = target.with_suffix(".fp32.onnx") if quantized else target
    _export(model, exported)
    if quantized:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(exported, target, weight_type=QuantType.QInt8, per_channel=True)


def _export(model: SentenceTransformer, target: Path) -> None:
    import torch

    names = list(model.tokenizer(["probe"], return_tensors="pt"))

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features = dict(zip(names, tensors, strict=True))
            out = self.model(features)
            return out["sentence_embedding"], out["token_embeddings"]

    sample = model.tokenizer(["a probe sentence", "two"], padding=True, return_tensors="pt")
    axes: dict[str, dict[int, str]] = {n: {0: "batch", 1: "tokens"} for n in names}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer chatter about Python-level shape checks
        torch.onnx.export(
            Pipeline().eval(),
            tuple(sample[n] for n in names),
            str(target),
            input_names=names,
            output_names=["sentence_embedding", "token_embeddings"],
            dynamic_axes={
                **axes,
                "sentence_embedding": {0: "batch"},
                "token_embeddings": {0: "batch", 1: "tokens"},
            },
            opset_version=OPSET,
            dynamo=False,  # the tracing exporter: no onnxscript, stable for BERT-style graphs
        )


class OnnxEncoder:
    """Tokenise with the model's own fast tokenizer (``tokenizer.json``, through the
    ``tokenizers`` library), run the graph, return unit vectors. Neither torch nor
    transformers is imported: a service embedding this way holds ≈110 MiB for it, against
    ≈500 MiB with sentence-transformers loaded."""

    def __init__(self, model_dir: Path, path: Path, *, threads: int, arena: bool = False) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        where, max_length = _transformer_dir(model_dir)
        if not (where / "tokenizer.json").is_file():
            raise ConfigurationError(
                f"{where} has no tokenizer.json (a fast tokenizer), which the ONNX backends "
                "read; embedding_backend 'torch' runs the model as it is"
            )
        self._tokenizer = Tokenizer.from_file(str(where / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # No CPU memory arena (ONNX Runtime's default has one; ``arena``: only to compare):
        # an arena grows in regions of doubling size to the most its runs ever held at once
        # (texts up to the token limit, on three lanes) and never gives one back: 132 MiB
        # held after texts of many lengths, its pages made resident for good as runs reach
        # them (the soak's creeping heap). Without it a run's tensors come from malloc and
        # go back after it; ``serve``'s one malloc arena lets a trim return the pages. The
        # same CPU per text (``benchmarks/onnx_heap.py``). The memory pattern (one planned
        # block per token count) stays: bounded by the limit (≈1.5 MiB at 256 tokens).
        options.enable_cpu_mem_arena = arena
        self._session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._pooled = ["sentence_embedding"]
        unknown = set(self._inputs) - set(_FEATURES)
        if unknown:
            raise ConfigurationError(f"{path} wants inputs {sorted(unknown)}; re-export it")
        self.dimension = len(self.encode(["probe"])[0])

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, one text per run. Batching buys almost nothing here (measured: 188
        vs 196 texts/s for equal lengths) and costs much: a batch is padded to its longest
        text (dialogue turns: 5x slower), and int8 activations are scaled per tensor, so
        a batch's neighbours would move a text's vector (by up to cosine 0.99). Alone, the
        same text always gets the same vector."""
        rows = []
        for text in texts:
            encoding = self._tokenizer.encode(text)  # encode_batch would start a thread pool
            feeds = {
                name: np.asarray([getattr(encoding, _FEATURES[name])], dtype=np.int64)
                for name in self._inputs
            }
            [vector] = self._session.run(self._pooled, feeds)[0]
            rows.append(vector / max(float(np.linalg.norm(vector)), 1e-12))
        return np.array(rows, dtype=np.float32)

    def encode_spans(self, text: str, spans: Spans) -> tuple[np.ndarray, np.ndarray]:
        """``text``'s unit vector and, from the same run, a unit vector per span (``spans``:
        per vector, the character ranges whose tokens it pools: late chunking). A span's
        vector is the mean of the token embeddings whose characters lie in its ranges, as
        the model's own mean pooling makes the text's vector from all of them."""
        encoding = self._tokenizer.encode(text)
        feeds = {
            name: np.asarray([getattr(encoding, _FEATURES[name])], dtype=np.int64)
            for name in self._inputs
        }
        [vector], [tokens] = self._session.run(["sentence_embedding", "token_embeddings"], feeds)
        return _unit(vector[None, :])[0], pool(tokens, encoding.offsets, spans)


def pool(tokens: np.ndarray, offsets: list[tuple[int, int]], spans: Spans) -> np.ndarray:
    """Unit vectors, one per entry of ``spans``: the mean of the rows of ``tokens`` whose
    character ``offsets`` fall in its ranges (special tokens, offsets (0, 0), in none; a
    span whose tokens were truncated away pools nothing and is a zero row)."""
    starts = np.asarray([o[0] for o in offsets])
    ends = np.asarray([o[1] for o in offsets])
    real = ends > starts
    rows = np.zeros((len(spans), tokens.shape[-1]), dtype=np.float64)
    for n, ranges in enumerate(spans):
        mask = np.zeros(len(offsets), dtype=bool)
        for start, end in ranges:
            mask |= real & (starts >= start) & (ends <= end)
        if mask.any():
            rows[n] = tokens[mask].mean(axis=0)
    return _unit(rows)


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: np.ndarray = (rows / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


#: Graph inputs and the ``tokenizers.Encoding`` attribute that feeds each.
_FEATURES = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


def _transformer_dir(model_dir: Path) -> tuple[Path, int]:
    """Where a sentence-transformers model keeps its transformer (tokenizer included), and
    its token limit, as ``modules.json`` and ``sentence_bert_config.json`` say."""
    where = model_dir
    modules = model_dir / "modules.json"
    if modules.is_file():
        for module in json.loads(modules.read_text()):
            if str(module.get("type", "")).endswith("Transformer"):
                where = model_dir / str(module.get("path", ""))
                break
    max_length = 512
    for config in (where / "sentence_bert_config.json", model_dir / "sentence_bert_config.json"):
        if config.is_file():
            max_length = int(json.loads(config.read_text()).get("max_seq_length") or 512)
            break
    return where, max_length


def main() -> None:
    parser = argparse.ArgumentParser(description="Export a sentence-transformers model to ONNX.")
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--int8", action="store_true", help="quantize weights to int8")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.disable(logging.WARNING)  # the quantizer's advice to pre-process
    export(args.model_dir, args.target, quantized=args.int8)


if __name__ == "__main__":
    main()
