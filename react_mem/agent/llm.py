"""One reasoning step: ask the LLM, parse its reply, correct it once if malformed.

The text-completion service owns the retries; here every call is made once, within the
iteration's :class:`Deadline`, which the client tells the service
(``TextCompletionRequest.timeout``) so that it answers, with an error if need be, before
the agent stops waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from react_mem.agent import json_reply
from react_mem.agent.parse import CORRECTION, Action, Final, ParseError, parse_reply
from react_mem.agent.streaming import StreamingReplyParser
from react_mem.clients.llm import Deadline as Deadline
from react_mem.clients.llm import TextCompletionClient
from react_mem.errors import LLMError as LLMError
from react_mem.processor.flow import Flow
from react_mem.schema import TextCompletionRequest, TextCompletionResponse

Sink = Callable[[str, str], Awaitable[None]]  # (kind "thought"|"answer", text)


@dataclass
class Usage:
    in_tokens: int = 0
    out_tokens: int = 0
    model: str | None = None
    calls: int = 0

    def add(self, response: TextCompletionResponse) -> None:
        self.in_tokens += response.in_token or 0
        self.out_tokens += response.out_token or 0
        self.model = response.model or self.model
        self.calls += 1


@dataclass(frozen=True)
class ReplyFormat:
    """How the LLM is asked to reply: TrustGraph's ReAct text, or schema-constrained JSON."""

    json: bool = False
    tool_names: Sequence[str] = ()
    #: The playbook bullets in the prompt, which the reply may cite (JSON: an enum).
    bullet_ids: Sequence[str] = ()

    def parse(self, text: str) -> Action | Final:
        return json_reply.parse_json_reply(text) if self.json else parse_reply(text)

    @property
    def correction(self) -> str:
        return json_reply.CORRECTION if self.json else CORRECTION

    def request(self, system: str, prompt: str, streaming: bool) -> TextCompletionRequest:
        if not self.json:
            return TextCompletionRequest(system=system, prompt=prompt, streaming=streaming)
        schema: dict[str, Any] = json_reply.schema(self.tool_names, self.bullet_ids)
        return TextCompletionRequest(
            system=system, prompt=prompt, response_format="json", schema=schema
        )


TEXT = ReplyFormat()


async def complete(
    flow: Flow,
    system: str,
    prompt: str,
    usage: Usage,
    *,
    deadline: Deadline,
    sink: Sink | None,
    form: ReplyFormat = TEXT,
) -> str:
    """The reply text; with ``sink``, streamed and fed through the reply parser as it comes
    (JSON replies are parsed whole, then sent to ``sink`` in one piece each).

    Raises :class:`LLMError` for an error reply, a malformed one, or none by ``deadline``.
    """
    client = TextCompletionClient.of(flow)
    request = form.request(system, prompt, sink is not None)
    try:
        async with asyncio.timeout_at(deadline.at):
            return await _exchange(client, request, usage, deadline, sink, form)
    except TimeoutError:
        raise deadline.expired() from None


async def _exchange(
    client: TextCompletionClient,
    request: TextCompletionRequest,
    usage: Usage,
    deadline: Deadline,
    sink: Sink | None,
    form: ReplyFormat,
) -> str:
    if sink is None or form.json:
        response = await client.complete(request, deadline=deadline)
        usage.add(response)
        if sink is not None:
            await _sink_whole(form, response.response, sink)
        return response.response
    parser = StreamingReplyParser()
    async for part in client.stream(request, deadline=deadline):
        for chunk in parser.feed(part.response):
            await sink(chunk.kind, chunk.text)
        if part.end_of_stream:
            usage.add(part)
    for chunk in parser.finish():
        await sink(chunk.kind, chunk.text)
    return parser.text


async def _sink_whole(form: ReplyFormat, text: str, sink: Sink) -> None:
    try:
        decision = form.parse(text)
    except ParseError:
        return
    if decision.thought:
        await sink("thought", decision.thought)
    if isinstance(decision, Final):
        await sink("answer", decision.answer)


async def decide(
    flow: Flow,
    system: str,
    prompt: str,
    usage: Usage,
    *,
    deadline: Deadline,
    sink: Sink | None,
    form: ReplyFormat = TEXT,
) -> tuple[Action | Final | ParseError, int]:
    """The parsed decision (or the second parse error) and how many retries it took; both
    calls share ``deadline``."""
    text = await complete(flow, system, prompt, usage, deadline=deadline, sink=sink, form=form)
    try:
        return form.parse(text), 0
    except ParseError as first:
        corrective = (
            f"{prompt}\n\nYour previous reply could not be used: {first}\n{form.correction}"
        )
        text = await complete(
            flow, system, corrective, usage, deadline=deadline, sink=sink, form=form
        )
        try:
            return form.parse(text), 1
        except ParseError as second:
            return second, 1
