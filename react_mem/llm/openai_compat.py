"""Text completion through any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp
server, OpenAI), with the official ``openai`` SDK. Retries are the processor's, not the SDK's.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from enum import StrEnum
from typing import Any, ClassVar

import openai
from pydantic import Field, SecretStr

from react_mem.llm.base import (
    Completion,
    LLMBackend,
    LLMError,
    LLMSettings,
    LLMUnavailable,
    Prompt,
    TextCompletionProcessor,
)
from react_mem.processor.settings import ProcessorSettings

#: Sent when no key is configured: local servers ignore it, but the SDK insists on one.
NO_KEY = "no-key"


class JsonMode(StrEnum):
    #: ``{"type": "json_schema", ...}`` with the request's schema (json_object without one).
    JSON_SCHEMA = "json_schema"
    #: ``{"type": "json_object"}`` only: any valid JSON (older servers, OpenAI's JSON mode).
    JSON_OBJECT = "json_object"
    #: No ``response_format``: the prompt alone asks for JSON.
    NONE = "none"


def _env_key() -> SecretStr | None:
    key = os.environ.get("OPENAI_API_KEY")
    return SecretStr(key) if key else None


class OpenAISettings(LLMSettings):
    #: A server answers many requests at once; with one slot, a single hung call would
    #: hold every other caller until its deadline. Requests received beyond ``parallel``
    #: wait at the priority gate, agent requests before the learner's.
    concurrency: int = Field(default=32, ge=1, le=1000)
    parallel: int | None = Field(default=8, ge=1, le=1000)
    #: Default: ``OPENAI_BASE_URL`` from the environment, else OpenAI's API.
    base_url: str = Field(
        default_factory=lambda: os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
    )
    model: str = "gpt-4o-mini"
    #: Default: ``OPENAI_API_KEY`` from the environment. Never logged.
    api_key: SecretStr | None = Field(default_factory=_env_key)
    max_tokens: int | None = Field(default=None, ge=1)
    #: Seconds per attempt to connect, and between bytes read (a stream's chunks included).
    timeout: float = Field(default=120.0, gt=0)
    json_mode: JsonMode = JsonMode.JSON_SCHEMA
    #: Ask for token counts at the end of a stream (``stream_options.include_usage``).
    stream_usage: bool = True


class OpenAIBackend:
    def __init__(self, settings: OpenAISettings) -> None:
        self.settings = settings
        self.model = settings.model
        key = settings.api_key.get_secret_value() if settings.api_key else NO_KEY
        # Built at once (it connects on its first request, not here): nothing waits for start().
        self.client = openai.AsyncOpenAI(
            api_key=key, base_url=settings.base_url, timeout=settings.timeout, max_retries=0
        )

    async def start(self) -> None:
        """Nothing to open: the client connects on its first request."""

    async def close(self) -> None:
        await self.client.close()

    def _arguments(self, prompt: Prompt) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": prompt.model or self.settings.model,
            "messages": prompt.messages(),
            "temperature": (
                self.settings.temperature if prompt.temperature is None else prompt.temperature
            ),
        }
        if self.settings.max_tokens is not None:
            args["max_tokens"] = self.settings.max_tokens
        if prompt.json and self.settings.json_mode != JsonMode.NONE:
            if prompt.schema is not None and self.settings.json_mode == JsonMode.JSON_SCHEMA:
                args["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "response", "schema": prompt.schema},
                }
            else:
                args["response_format"] = {"type": "json_object"}
        return args

    async def complete(self, prompt: Prompt) -> Completion:
        try:
            reply = await self.client.chat.completions.create(**self._arguments(prompt))
        except openai.OpenAIError as exc:
            raise _mapped(exc) from exc
        if not reply.choices:
            raise LLMError(f"{self.settings.base_url} returned no choices")
        usage = reply.usage
        return Completion(
            text=reply.choices[0].message.content or "",
            in_token=usage.prompt_tokens if usage else None,
            out_token=usage.completion_tokens if usage else None,
            model=reply.model or prompt.model or self.model,
        )

    async def stream(self, prompt: Prompt) -> AsyncGenerator[Completion, None]:
        args = self._arguments(prompt) | {"stream": True}
        if self.settings.stream_usage:
            args["stream_options"] = {"include_usage": True}
        in_token = out_token = None
        model = prompt.model or self.model
        try:
            chunks = await self.client.chat.completions.create(**args)
            async with chunks:
                async for chunk in chunks:
                    model = chunk.model or model
                    if chunk.usage is not None:
                        in_token = chunk.usage.prompt_tokens
                        out_token = chunk.usage.completion_tokens
                    if chunk.choices and chunk.choices[0].delta.content:
                        yield Completion(text=chunk.choices[0].delta.content, model=model)
        except openai.OpenAIError as exc:
            raise _mapped(exc) from exc
        yield Completion(text="", in_token=in_token, out_token=out_token, model=model)


def _mapped(exc: openai.OpenAIError) -> LLMError:
    """Connection failures, timeouts, 408/409/429 and 5xx are worth retrying; the rest not."""
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return LLMUnavailable(f"endpoint unreachable: {exc}")
    if isinstance(exc, openai.APIStatusError):
        message = f"endpoint answered {exc.status_code}: {exc.message}"
        if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
            return LLMUnavailable(message)
        return LLMError(message)
    return LLMError(f"{type(exc).__name__}: {exc}")


class OpenAICompatibleProcessor(TextCompletionProcessor):
    Settings: ClassVar[type[ProcessorSettings]] = OpenAISettings
    settings: OpenAISettings

    def create_backend(self) -> LLMBackend:
        return OpenAIBackend(self.settings)
