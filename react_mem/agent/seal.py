"""Only the agent produces ``AgentRequest.memory``: the state is sealed with an HMAC.

The state carries rendered memory into the prompt and what was used into the trajectory,
and it travels on the request queue (the ``next`` request), where any client can publish.
So the agent seals it: HMAC-SHA256 over canonical JSON of the state and of the invocation it
belongs to (workspace, flow, collection, user, conversation, session, question); a state
that does not verify is refused as ``invalid``. Nothing is kept per session, so any replica
holding the same key continues any invocation. The key is ``memory_state_key`` (shared by
replicas through config or a secret), else one generated once and kept in the state dir.

The seal covers the ``history`` its ``next`` request carries too (a forged tool observation
does not verify), and a sealed state is good once: each replica remembers the seals it has
opened (for ``max_age``, the oldest an invocation's state may be) and refuses one seen
before, so a captured ``next`` request replayed unchanged costs no LLM call. A consumer's
own retry of the same message (``redelivery_count`` > 0) is not a replay. Across replicas
a replay is bounded by ``max_age``: the state's start time is under the seal.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from react_mem.errors import BadRequest, ConfigurationError
from react_mem.schema.agent import AgentRequest, AgentStep, MemoryState

VERSION = "v1"
MIN_KEY_CHARS = 32


def invocation(request: AgentRequest, workspace: str, flow: str) -> dict[str, Any]:
    """What a state is bound to: it cannot be carried to another user, scope or session."""
    return {
        "workspace": workspace,
        "flow": flow,
        "collection": request.collection,
        "user": request.user,
        "conversation_id": request.conversation_id,
        "session_id": request.session_id,
        "question": request.question,
    }


def with_history(bound_to: dict[str, Any], history: Sequence[AgentStep]) -> dict[str, Any]:
    """``bound_to`` and the history the request carries (as a digest)."""
    steps = [step.model_dump(mode="json") for step in history]
    text = json.dumps(steps, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return bound_to | {"history": hashlib.sha256(text.encode("ascii")).hexdigest()}


class SeenSeals:
    """The seals this replica has opened within ``max_age`` (at most ``limit``, oldest
    forgotten first): a state opened once is refused the second time."""

    def __init__(
        self, max_age: float, *, limit: int = 200_000, clock: Callable[[], float] = time.time
    ) -> None:
        self.max_age, self._limit, self._clock = max_age, limit, clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def claim(self, state: MemoryState) -> None:
        now = self._clock()
        if now - state.started_at > self.max_age:
            raise BadRequest(
                f"AgentRequest.memory expired: its invocation began over {self.max_age:.0f}s ago",
                type="invalid",
            )
        while self._seen and (
            len(self._seen) >= self._limit or now - next(iter(self._seen.values())) > self.max_age
        ):
            self._seen.popitem(last=False)
        if state.seal in self._seen:
            raise BadRequest(
                "AgentRequest.memory was used before: a replayed next request is refused",
                type="invalid",
            )
        self._seen[state.seal] = now


class StateSealer:
    def __init__(self, key: str) -> None:
        if len(key) < MIN_KEY_CHARS:
            raise ConfigurationError(
                f"setting 'memory_state_key': at least {MIN_KEY_CHARS} characters (got {len(key)})"
            )
        self._key = key.encode("utf-8")

    def seal(self, state: MemoryState, bound_to: dict[str, Any]) -> MemoryState:
        return state.model_copy(update={"seal": self._mac(state, bound_to)})

    def open(self, state: MemoryState, bound_to: dict[str, Any]) -> MemoryState:
        """The state if the agent sealed it for this invocation; else :class:`BadRequest`."""
        if not state.seal:
            raise BadRequest(
                "AgentRequest.memory is set by the agent only: this one is not sealed",
                type="invalid",
            )
        if not hmac.compare_digest(state.seal, self._mac(state, bound_to)):
            raise BadRequest(
                "AgentRequest.memory does not verify: forged, altered, or sealed for another "
                "invocation or with another memory_state_key",
                type="invalid",
            )
        return state

    def _mac(self, state: MemoryState, bound_to: dict[str, Any]) -> str:
        body = {"state": state.model_dump(mode="json", exclude={"seal"}), "for": bound_to}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        digest = hmac.new(self._key, text.encode("ascii"), hashlib.sha256).hexdigest()
        return f"{VERSION}:{digest}"


def load_key(given: str | None, path: Path) -> str:
    """``given``, else the key in ``path``, created there (mode 0600) if absent. Processors
    sharing a state dir race safely: the first link wins and the others read it."""
    if given is not None:
        return given
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
        try:
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)
        finally:
            draft.unlink()
    return path.read_text(encoding="utf-8").strip()
