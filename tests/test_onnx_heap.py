"""The embedder's ONNX Runtime session keeps no memory arena: what a run allocates goes back
to the C heap after it, so texts of ever new lengths do not leave the process holding the
most it ever needed (ONNX Runtime's default arena did: +32 MiB over the lengths below)."""

from __future__ import annotations

import ctypes
import sys

import pytest

from react_mem.embedding import onnx
from react_mem.embedding.sentence import model_path

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def malloc_in_use_mib() -> float:
    """What malloc has handed out and not had back, every arena (glibc 2.33+)."""
    libc = ctypes.CDLL("libc.so.6")
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("glibc before 2.33")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return float(info.uordblks + info.hblkhd) / 2**20


def test_texts_of_every_length_leave_little_behind() -> None:
    path = model_path("all-MiniLM-L6-v2")
    encoder = onnx.OnnxEncoder(path, onnx.graph(path, quantized=True), threads=1)
    before = malloc_in_use_mib()
    for words in range(1, 260, 2):  # every token count the model's window takes, roughly
        encoder.encode([" ".join(["word"] * words)])
    # Left: the memory pattern planned per token count (≈1.5 MiB), bounded by the window.
    assert malloc_in_use_mib() - before < 8, malloc_in_use_mib() - before
