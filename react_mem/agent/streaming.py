"""Streaming a ReAct reply: its thought and final-answer text, sent on as it arrives."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from react_mem.agent.parse import CLOSE_FENCE, MARKER, OPEN_FENCE, marker_kind

__all__ = ["Chunk", "StreamingReplyParser"]

State = Literal["skip", "thought", "answer", "done"]
# A Bullets line (cited ids) is not streamed; the markers after it are.
_NEXT: dict[str, State] = {
    "thought": "thought",
    "final": "answer",
    "args": "skip",
    "bullets": "skip",
}
# What may open a line before a marker's keyword (see MARKER).
_DECOR = re.compile(r"[ \t]*(?:\#{1,6}[ \t]*)?(?:[*_]{1,2}[ \t]*)?")
_WORDS = (
    "thought",
    "actioninput",
    "action",
    "args",
    "finalanswer",
    "observation",
    "bulletsused",
    "bullets",
)


@dataclass(frozen=True)
class Chunk:
    kind: Literal["thought", "answer"]
    text: str


class StreamingReplyParser:
    """Reads LLM output chunk by chunk and emits the reply's thought and answer text.

    Concatenated, the thought chunks equal ``parse_reply(text).thought`` and the answer
    chunks its ``answer`` for a well-formed reply. Markers, Action and Args text are never
    emitted. Text is held back only while it may still turn out to be a marker (an
    unfinished line such as ``"Final Ans"``), trailing whitespace, or the closing fence of
    a reply wrapped in ```. Call ``finish()`` once at the end, then ``parse_reply(text)``.
    """

    def __init__(self) -> None:
        self._text = ""
        self._state: State = "skip"  # skip: before a marker, or in text that is ignored
        self._line = 0  # start of the line being read
        self._scan = 0  # where to look for its end
        self._in_line = False  # the line is known to be no marker: its text is content
        self._wrapped: bool | None = None  # the first line is an opening ``` fence
        self._start = 0  # content start of the open thought or answer
        self._sent: int | None = None  # end of what was emitted of it (None: nothing yet)
        self._had_thought = False
        self._out: list[Chunk] = []

    @property
    def text(self) -> str:
        """Everything fed so far."""
        return self._text

    def feed(self, chunk: str) -> list[Chunk]:
        self._text += chunk
        self._read(final=False)
        return self._take()

    def finish(self) -> list[Chunk]:
        """Emit what was held back for lack of what follows."""
        self._read(final=True)
        return self._take()

    def _read(self, final: bool) -> None:
        t = self._text
        while self._state in ("skip", "thought"):
            nl = t.find("\n", self._scan)
            end = len(t) if nl < 0 else nl
            if not self._in_line:
                m = MARKER.match(t, self._line)
                # On an unfinished line, more bold after the colon would still be markup.
                if m and (nl >= 0 or final or m.end() < end or len(m["close"]) == 2):
                    self._open(marker_kind(m), m.end())
                    continue
                if nl < 0 and not final and (m or _may_be_marker(t[self._line :])):
                    break  # wait: the line may still become a marker
                self._in_line = True
            if nl < 0 and not final:
                self._scan = len(t)
                break
            if self._wrapped is None and t[self._line : end].strip():
                self._wrapped = bool(OPEN_FENCE.fullmatch(t[self._line : end].strip()))
            if nl < 0:
                break
            self._line = self._scan = nl + 1
            self._in_line = False
        if self._state == "thought":
            self._flush("thought", len(t) if self._in_line or final else self._line)
        elif self._state == "answer":
            self._flush("answer", self._answer_end(final))

    def _open(self, kind: str, content: int) -> None:
        """Act on a marker whose line's content starts at `content`."""
        if self._wrapped is None:
            self._wrapped = False
        if self._state == "thought":
            self._flush("thought", self._line)
        self._state = _NEXT.get(kind, "done")  # Action or Observation: nothing more to emit
        self._start, self._sent = content, None
        self._scan, self._in_line = content, True

    def _answer_end(self, final: bool) -> int:
        """The answer runs to the end, less a last line that closes (or may) the wrapping fence."""
        t, end = self._text, len(self._text)
        if not self._wrapped:
            return end
        stop = end
        while stop > self._start and t[stop - 1].isspace():
            stop -= 1
        i = stop
        while i > self._start and t[i - 1] in "` \t":
            i -= 1
        fence_line = i < stop and i > self._start and t[i - 1] == "\n"
        if fence_line and (not final or CLOSE_FENCE.fullmatch(t[i:stop].strip())):
            return i - 1
        return end

    def _flush(self, kind: Literal["thought", "answer"], end: int) -> None:
        """Emit the open section's text up to `end`, as if stripped: outer whitespace held."""
        t = self._text
        if self._sent is None:
            first = self._start
            while first < end and t[first].isspace():
                first += 1
            if first == end:
                return
            self._sent = first
            if kind == "thought":
                if self._had_thought:
                    self._emit(kind, "\n")  # thoughts are joined by newlines
                self._had_thought = True
        stop = end
        while stop > self._sent and t[stop - 1].isspace():
            stop -= 1
        if stop > self._sent:
            self._emit(kind, t[self._sent : stop])
            self._sent = stop

    def _emit(self, kind: Literal["thought", "answer"], text: str) -> None:
        if self._out and self._out[-1].kind == kind:
            text = self._out.pop().text + text
        self._out.append(Chunk(kind, text))

    def _take(self) -> list[Chunk]:
        out, self._out = self._out, []
        return out


def _may_be_marker(line: str) -> bool:
    """Whether more text could make this unfinished line a marker (over-cautious is fine)."""
    decor = _DECOR.match(line)
    word = re.sub(r"[ \t]", "", line[decor.end() if decor else 0 :]).lower()
    stem = word.rstrip("*_")
    if stem == word:
        return any(w.startswith(word) for w in _WORDS)
    return stem in _WORDS and len(word) - len(stem) <= 2
