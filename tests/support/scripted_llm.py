"""A test double of the text-completion service: a real processor on the bus, scripted.

It consumes ``TextCompletionRequest`` on its ``request`` queue and answers each with what
its script returns: a string (a completion), a ``TextCompletionResponse`` (say one with an
``error``), or ``None`` to stay silent so the caller times out. Every request is recorded.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema import Error, TextCompletionRequest, TextCompletionResponse
from tests.support.ping import flow_file

Reply = str | TextCompletionResponse | None
CHUNK = 7
Script = Callable[[TextCompletionRequest], Reply | Awaitable[Reply]]


def error_reply(message: str = "model overloaded") -> TextCompletionResponse:
    return TextCompletionResponse(error=Error(type="llm-error", message=message))


def silent(_: TextCompletionRequest) -> Reply:
    return None


def replies(*script: Reply) -> Script:
    """Answer with ``script`` in order, repeating the last one."""
    remaining = list(script)

    def next_reply(_: TextCompletionRequest) -> Reply:
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    return next_reply


class ScriptedLLM(Processor):
    default_id: ClassVar[str] = "scripted-llm"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        script: Script = silent,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.script = script
        self.requests: list[TextCompletionRequest] = []
        self.register_specification(
            ConsumerSpec(
                name="request",
                schema=TextCompletionRequest,
                handler=self.on_request,
                response="response",
                error_reply=lambda e: TextCompletionResponse(error=e),
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=TextCompletionResponse))

    async def on_request(self, request: TextCompletionRequest, ctx: MessageContext) -> None:
        self.requests.append(request)
        reply = self.script(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if reply is None:
            return
        if isinstance(reply, str):
            text = reply
            # Streaming requests get a few characters per response, as a model streams.
            chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
            if not request.streaming:
                chunks = [text]
            for chunk in chunks[:-1]:
                await ctx.reply(TextCompletionResponse(response=chunk))
            reply = TextCompletionResponse(
                response=chunks[-1],
                in_token=len(request.prompt.split()),
                out_token=len(text.split()),
                model="scripted",
                end_of_stream=True,
            )
        await ctx.reply(reply)


async def start_scripted_llm(
    transport: Transport,
    tmp_path: Path,
    unique: str,
    *,
    registry: CollectorRegistry | None = None,
    script: Script = silent,
) -> tuple[ScriptedLLM, dict[str, str]]:
    """A started scripted LLM on fresh queues; returns it and its ``request``/``response`` ids."""
    pid = f"llm-{unique}"
    topics = {"request": f"request:tg:tc-{unique}", "response": f"response:tg:tc-{unique}"}
    settings = ProcessorSettings.load({"id": pid, "flows": flow_file(tmp_path, pid, topics)})
    llm = ScriptedLLM(settings, transport, registry=registry or CollectorRegistry(), script=script)
    await llm.start()
    return llm, topics
