"""One reasoning step: ask the LLM, parse its reply, correct it once if malformed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

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


async def complete(
    flow: Flow, system: str, prompt: str, usage: Usage, *, timeout: float, sink: Sink | None
) -> str:
    """The reply text; with ``sink``, streamed and fed through the reply parser as it comes."""
    client = flow.client(TEXT_COMPLETION)
    request = TextCompletionRequest(system=system, prompt=prompt, streaming=sink is not None)
    if sink is None:
        response: TextCompletionResponse = await client.request(request, timeout=timeout)
        if response.error is not None:
            raise LLMError(response.error.message)
        usage.add(response)
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


async def decide(
    flow: Flow, system: str, prompt: str, usage: Usage, *, timeout: float, sink: Sink | None
) -> tuple[Action | Final | ParseError, int]:
    """The parsed decision (or the second parse error) and how many retries it took."""
    text = await complete(flow, system, prompt, usage, timeout=timeout, sink=sink)
    try:
        return parse_reply(text), 0
    except ParseError as first:
        corrective = f"{prompt}\n\nYour previous reply could not be used: {first}\n{CORRECTION}"
        text = await complete(flow, system, corrective, usage, timeout=timeout, sink=sink)
        try:
            return parse_reply(text), 1
        except ParseError as second:
            return second, 1
