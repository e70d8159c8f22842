"""The AgentResponse stream in TrustGraph's shape.

Non-streaming: one message per thought and observation (``end_of_message``), then the
answer with ``end_of_message`` and ``end_of_dialog``. Streaming: chunks of one message id
with ``end_of_message`` false, the last of each message marked; the answer's chunks end
with an empty terminal answer carrying both flags. Errors: ``error`` with end_of_dialog.

Ids and error types are agent-manager's: message ids are its provenance URIs (the answer's
``agent_final_uri``, ``urn:trustgraph:agent:<session>/final``), and every error is of type
``agent-error``, react-mem's own kind (``llm-error``, ``invalid``, ``malformed``) leading
its message.
"""

from __future__ import annotations

from react_mem.processor.context import MessageContext
from react_mem.schema import AgentResponse, Error

ERROR_TYPE = "agent-error"


def error_response(message: str, *, kind: str = ERROR_TYPE) -> AgentResponse:
    """agent-manager's error reply; a ``kind`` other than ``agent-error`` leads the message."""
    if kind != ERROR_TYPE:
        message = f"{kind}: {message}"
    return AgentResponse(
        message_type="error",
        content=message,
        end_of_message=True,
        end_of_dialog=True,
        error=Error(type=ERROR_TYPE, message=message),
    )


class Responder:
    def __init__(self, ctx: MessageContext, session_id: str, iteration: int, streaming: bool):
        self.ctx, self.streaming = ctx, streaming
        base = f"urn:trustgraph:agent:{session_id}"
        self.thought_id = f"{base}/i{iteration}/thought"
        self.observation_id = f"{base}/i{iteration}/observation"
        self.answer_id = f"{base}/final"
        self.in_token: int | None = None
        self.out_token: int | None = None
        self.model: str | None = None
        self._thought_open = False

    async def _send(self, kind: str, content: str, message_id: str, *, end: bool) -> None:
        await self.ctx.reply(
            AgentResponse(
                message_type=kind, content=content, end_of_message=end, message_id=message_id
            )
        )

    async def stream_chunk(self, kind: str, text: str) -> None:
        """A piece of a streamed reply: thought text, then (for a final reply) answer text."""
        if kind == "thought":
            self._thought_open = True
            await self._send("thought", text, self.thought_id, end=False)
        else:
            await self._end_thought()
            await self._send("answer", text, self.answer_id, end=False)

    async def _end_thought(self) -> None:
        if self._thought_open:
            self._thought_open = False
            await self._send("thought", "", self.thought_id, end=True)

    async def thought(self, text: str) -> None:
        """A whole thought, or (streaming) the end of the one sent in chunks, if still open."""
        if self.streaming:
            await self._end_thought()
        else:
            await self._send("thought", text, self.thought_id, end=True)

    async def observation(self, text: str) -> None:
        await self._send("observation", text, self.observation_id, end=True)

    async def answer(self, text: str) -> None:
        """The end of the dialog: the whole answer, or (streaming) the terminal marker."""
        await self.ctx.reply(
            AgentResponse(
                message_type="answer",
                content="" if self.streaming else text,
                end_of_message=True,
                end_of_dialog=True,
                message_id=self.answer_id,
                in_token=self.in_token,
                out_token=self.out_token,
                model=self.model,
            )
        )

    async def error(self, message: str, *, kind: str = ERROR_TYPE) -> None:
        await self.ctx.reply(error_response(message, kind=kind))
