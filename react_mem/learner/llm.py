"""JSON answers from the flow's text-completion service, tolerant of a small model's junk.

Each call asks for constrained output (``response_format="json"`` with a JSON Schema) and
validates the reply with pydantic. A reply that is not the asked-for JSON is asked again,
then given up on (``None``): callers learn nothing rather than garbage. When the service
itself fails every attempt (timeouts, error replies) :class:`LLMUnavailable` is raised, so
the caller can retry the record later instead of learning without the LLM.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from react_mem.errors import BadRequest, TransientError
from react_mem.schema import TextCompletionRequest, TextCompletionResponse

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

#: Send one request and await its response, waiting at most the given seconds.
Complete = Callable[[TextCompletionRequest, float], Awaitable[TextCompletionResponse]]
#: Turn a parsed JSON value into the shape the model expects (lists into objects, ...).
Coerce = Callable[[Any], Any]


class LLMUnavailable(TransientError):
    """Every attempt failed at the service (timeout or error reply), not at the reply."""


class JsonLLM:
    def __init__(self, complete: Complete, *, attempts: int = 2, timeout: float = 60.0) -> None:
        self._complete = complete
        self._attempts = attempts
        self._timeout = timeout

    async def ask(
        self,
        system: str,
        prompt: str,
        model: type[M],
        *,
        coerce: Coerce = lambda v: v,
        schema: type[BaseModel] | None = None,
    ) -> M | None:
        """The reply validated as ``model``; ``None`` when replies stay malformed.

        ``schema`` (default ``model``) is the stricter shape the LLM is asked for.
        """
        request = TextCompletionRequest(
            system=system,
            prompt=prompt,
            response_format="json",
            schema=(schema or model).model_json_schema(),
            # Learning waits for the LLM behind agent requests, and the service gives up
            # (answers llm-error) when this caller would stop waiting.
            priority="background",
            timeout=min(self._timeout, 86_400.0),
        )
        failures: list[str] = []
        answered = False
        for _ in range(self._attempts):
            try:
                response = await self._complete(request, self._timeout)
            except (TransientError, BadRequest) as exc:
                failures.append(repr(exc))
                continue
            if response.error is not None:
                failures.append(f"{response.error.type}: {response.error.message}")
                continue
            answered = True
            found = parse(response.response, model, coerce)
            if found is not None:
                return found
            failures.append(f"malformed reply {response.response[:200]!r}")
        if not answered:
            raise LLMUnavailable(f"text completion failed: {'; '.join(failures)}")
        logger.info("no usable %s from the LLM: %s", model.__name__, "; ".join(failures))
        return None


def parse(text: str, model: type[M], coerce: Coerce = lambda v: v) -> M | None:
    """The first JSON value in ``text`` (code fences and chatter around it ignored)."""
    value = first_json(text)
    if value is None:
        return None
    try:
        return model.model_validate(coerce(value))
    except (ValidationError, TypeError, ValueError):
        return None


def first_json(text: str) -> Any:
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            return value
    return None
