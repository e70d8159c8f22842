"""JSON answers from the flow's text-completion service, tolerant of a small model's junk.

Each call asks for constrained output (``response_format="json"`` with a JSON Schema) and
validates the reply with pydantic. A reply that is not the asked-for JSON is asked again,
then given up on (``None``): callers learn nothing rather than garbage. When the service
itself fails every attempt (timeouts, error replies) :class:`LLMUnavailable` is raised, so
the caller can retry the record later instead of learning without the LLM.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from react_mem.clients.llm import Complete as Complete
from react_mem.clients.llm import TextCompletionClient
from react_mem.errors import LLMError
from react_mem.errors import LLMUnavailable as LLMUnavailable
from react_mem.schema import TextCompletionRequest
from react_mem.text import first_json as first_json

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

#: Turn a parsed JSON value into the shape the model expects (lists into objects, ...).
Coerce = Callable[[Any], Any]


class JsonLLM:
    """Raises :class:`LLMUnavailable` when every attempt failed at the service (timeout,
    error reply), not at the reply."""

    def __init__(
        self,
        client: TextCompletionClient | Complete,
        *,
        attempts: int = 2,
        timeout: float = 60.0,
    ) -> None:
        self._client = TextCompletionClient.over(client)
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
            schema=_json_schema(schema or model),
            # Learning waits for the LLM behind agent requests, and the service gives up
            # (answers llm-error) when this caller would stop waiting.
            priority="background",
            timeout=min(self._timeout, 86_400.0),
        )
        failures: list[str] = []
        answered = False
        for _ in range(self._attempts):
            try:
                response = await self._client.complete(request, timeout=self._timeout)
            except LLMError as exc:
                failures.append(str(exc))
                continue
            answered = True
            found = parse(response.response, model, coerce)
            if found is not None:
                return found
            # Its size only: a reply echoes the user's words, which never reach a log.
            failures.append(f"malformed reply ({len(response.response)} characters)")
        if not answered:
            raise LLMUnavailable(
                f"text completion failed: {'; '.join(failures)}", service="text-completion"
            )
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


@functools.cache
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema, built once (pydantic builds it afresh at every call)."""
    return model.model_json_schema()
