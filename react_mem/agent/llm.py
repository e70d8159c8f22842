"""One reasoning step: ask the LLM, parse its reply, correct it once if malformed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from react_mem.agent import json_reply
from react_mem.agent.parse import CORRECTION, Action, Final, ParseError, parse_reply
from react_mem.agent.streaming import StreamingReplyParser
from react_mem.processor.flow import Flow
from react_mem.schema import TextCompletionRequest, TextCompletionResponse

TEXT_COMPLETION = "text-completion-request"

Sink = Callable[[str, str], Awaitable[None]]  # (kind "thought"|"answer", text)


class LLMError(RuntimeError):
    """The text-completion service answered with an error."""


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

    def parse(self, text: str) -> Action | Final:
        return json_reply.parse_json_reply(text) if self.json else parse_reply(text)

    @property
    def correction(self) -> str:
        return json_reply.CORRECTION if self.json else CORRECTION

    def request(self, system: str, prompt: str, streaming: bool) -> TextCompletionRequest:
        if not self.json:
            return TextCompletionRequest(system=system, prompt=prompt, streaming=streaming)
        schema: dict[str, Any] = json_reply.schema(self.tool_names)
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
    timeout: float,
    sink: Sink | None,
    form: ReplyFormat = TEXT,
) -> str:
    """The reply text; with ``sink``, streamed and fed through the reply parser as it comes
    (JSON replies are parsed whole, then sent to ``sink`` in one piece each)."""
    client = flow.client(TEXT_COMPLETION)
    request = form.request(system, prompt, sink is not None)
    if sink is None or form.json:
        response: TextCompletionResponse = await client.request(request, timeout=timeout)
        if response.error is not None:
            raise LLMError(response.error.message)
        usage.add(response)
        if sink is not None:
            await _sink_whole(form, response.response, sink)
        return response.response
    parser = StreamingReplyParser()

    def last(r: TextCompletionResponse) -> bool:
        return r.end_of_stream or r.error is not None

    async for part in client.stream(request, last=last, timeout=timeout):
        if part.error is not None:
            raise LLMError(part.error.message)
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
    timeout: float,
    sink: Sink | None,
    form: ReplyFormat = TEXT,
) -> tuple[Action | Final | ParseError, int]:
    """The parsed decision (or the second parse error) and how many retries it took."""
    text = await complete(flow, system, prompt, usage, timeout=timeout, sink=sink, form=form)
    try:
        return form.parse(text), 0
    except ParseError as first:
        corrective = (
            f"{prompt}\n\nYour previous reply could not be used: {first}\n{form.correction}"
        )
        text = await complete(
            flow, system, corrective, usage, timeout=timeout, sink=sink, form=form
        )
        try:
            return form.parse(text), 1
        except ParseError as second:
            return second, 1
