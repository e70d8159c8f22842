"""Import Presidio without torch.

spaCy (under Presidio) imports thinc, whose ``thinc.compat`` imports torch whenever it is
installed; Presidio's NER engines and recognizers import transformers and torch, and its
device detector torch (unless ``PRESIDIO_DEVICE`` is set). This project has both installed
(for the optional torch embedding backend), and neither is used here: the blank spaCy
pipeline only tokenises. Loaded anyway they cost a memory service ≈10 s of start-up and
≈300 MiB, when its ONNX embedder never imports torch. So :func:`presidio_modules` sets
``PRESIDIO_DEVICE=cpu`` (unless set) and installs a finder that refuses torch and
transformers to exactly those importers; every other importer (the torch embedding backend,
another thread) gets them as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Sequence
from types import FrameType, ModuleType

#: Modules whose imports of torch or transformers are optional and unwanted here.
OPTIONAL_IMPORTERS = ("thinc.compat", "presidio_analyzer.")
REFUSED = frozenset({"torch", "transformers"})

_lock = threading.Lock()


class _RefuseOptionalTorch(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in REFUSED and _importer().startswith(OPTIONAL_IMPORTERS):
            raise ModuleNotFoundError(f"{fullname} is not used by the PII screen", name=fullname)
        return None


def _importer() -> str:
    """The module whose import statement is running (skipping the import machinery)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not (name.startswith("importlib") or name == __name__):
            return name
        frame = frame.f_back
    return ""


def presidio_modules() -> None:
    """Import Presidio's analyzer and anonymizer (once), torch-free where possible."""
    os.environ.setdefault("PRESIDIO_DEVICE", "cpu")
    with _lock:
        if not any(isinstance(f, _RefuseOptionalTorch) for f in sys.meta_path):
            sys.meta_path.insert(0, _RefuseOptionalTorch())
        import presidio_analyzer  # noqa: F401
        import presidio_anonymizer  # noqa: F401
