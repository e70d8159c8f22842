"""Only the agent produces ``AgentRequest.memory``: the state is sealed with an HMAC.

The state carries rendered memory into the prompt and what was used into the trajectory,
and it travels on the request queue (the ``next`` request), where any client can publish.
So the agent seals it: HMAC-SHA256 over canonical JSON of the state and of the invocation it
belongs to (workspace, flow, collection, user, conversation, session, question); a state
that does not verify is refused as ``invalid``. Nothing is kept per session, so any replica
holding the same key continues any invocation. The key is ``memory_state_key`` (shared by
replicas through config or a secret), else one generated once and kept in the state dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from react_mem.errors import BadRequest, ConfigurationError
from react_mem.schema.agent import AgentRequest, MemoryState

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
