"""``soak.py`` with this round's two heap settings undone (``before``) or as they are
(``after``), to run side by side: the embedder's session with ONNX Runtime's CPU memory
arena, and glibc's arena per thread (``serve``'s ``one_malloc_arena`` not called). The
rest of the arguments go to ``soak.py``.

    OMP_NUM_THREADS=1 python benchmarks/soak_heap_ab.py before --minutes 6 --warmup 2 \\
        --retention 2 --rate 6 --trace
"""

from __future__ import annotations

import functools
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from react_mem.embedding import onnx  # noqa: E402
from react_mem.processor import runtime  # noqa: E402

if __name__ == "__main__":
    variant, rest = sys.argv[1], sys.argv[2:]
    if variant not in ("before", "after"):
        sys.exit("usage: soak_heap_ab.py before|after [soak.py's arguments]")
    if variant == "before":
        runtime.one_malloc_arena = lambda: False  # soak.py imports it after this
        onnx.OnnxEncoder.__init__ = functools.partialmethod(  # type: ignore[method-assign]
            onnx.OnnxEncoder.__init__, arena=True
        )
    print(f"heap settings: {variant}", flush=True)
    sys.argv = [str(HERE / "soak.py"), *rest]
    runpy.run_path(str(HERE / "soak.py"), run_name="__main__")
