"""Turn an AgentResponse stream into labelled messages, printed as they arrive.

Streaming responses arrive as chunks sharing a ``message_id`` until ``end_of_message``;
a streamed answer ends with an empty answer that carries ``end_of_dialog``. Non-streaming
responses are one complete message each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from react_mem.schema import AgentResponse, Error

LABELS = {
    "thought": "Thought",
    "action": "Action",
    "observation": "Observation",
    "answer": "Answer",
    "explain": "Explain",
}


@dataclass
class Message:
    type: str
    id: str
    content: str = ""
    done: bool = False


class Transcript:
    """Merges chunks into :attr:`messages`; with ``out``, writes each chunk as it comes."""

    def __init__(self, out: TextIO | None = None, *, verbose: bool = False) -> None:
        self._out = out
        self._verbose = verbose
        self.messages: list[Message] = []
        self.error: Error | None = None
        self.received = 0

    @property
    def answer(self) -> str:
        return "".join(m.content for m in self.messages if m.type == "answer")

    def feed(self, response: AgentResponse) -> None:
        self.received += 1
        if response.error is not None or response.message_type == "error":
            self.finish()
            self.error = response.error or Error(type="agent-error", message=response.content)
            return
        if response.message_type == "explain" and not self._verbose:
            return
        open_ = self.messages[-1] if self.messages and not self.messages[-1].done else None
        if open_ is None or (open_.type, open_.id) != (response.message_type, response.message_id):
            self.finish()
            if not response.content:  # an empty end marker: nothing to show
                return
            open_ = Message(response.message_type, response.message_id)
            self.messages.append(open_)
            label = LABELS.get(open_.type, open_.type.capitalize() or "Message")
            self._write(f"{label}: ")
            if open_.type == "explain" and response.explain_id:
                self._write(f"[{response.explain_id}] ")
        open_.content += response.content
        self._write(response.content)
        if response.end_of_message or response.end_of_dialog:
            self.finish()

    def finish(self) -> None:
        """End the open message, if any (its line too)."""
        if self.messages and not self.messages[-1].done:
            self.messages[-1].done = True
            self._write("\n")

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "messages": [{"type": m.type, "content": m.content} for m in self.messages],
            "error": None if self.error is None else self.error.to_wire(),
        }

    def _write(self, text: str) -> None:
        if self._out is not None and text:
            self._out.write(text)
            self._out.flush()
