"""Who may see the inspector: the holder of its token, and only them.

A request is let in with ``Authorization: Bearer <token>`` (scripts) or the session cookie
a login with the token sets (HttpOnly, SameSite=Strict). A state-changing request on a
session also carries that session's CSRF token (the ``csrf`` form field or the
``X-CSRF-Token`` header, which every page's forms and htmx send); a bearer request needs
none, since a browser never adds that header on its own. Everything else is refused.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

#: The session cookie's name.
COOKIE = "react_mem_inspector"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: A session lasts this long after login.
SESSION_SECONDS = 12 * 3600.0


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(slots=True)
class Session:
    csrf: str
    expires: float


@dataclass
class Gate:
    """The token and the live sessions (in memory: a restart logs everyone out)."""

    token: str
    sessions: dict[str, Session] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.token) < 16:
            raise ValueError("the inspector's token must have at least 16 characters")

    def token_ok(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())

    def bearer_ok(self, header: str | None) -> bool:
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(value.strip())

    def login(self, now: float | None = None) -> tuple[str, Session]:
        now = time.time() if now is None else now
        self.sessions = {k: s for k, s in self.sessions.items() if s.expires > now}
        sid = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(32), expires=now + SESSION_SECONDS)
        self.sessions[sid] = session
        return sid, session

    def session(self, sid: str | None, now: float | None = None) -> Session | None:
        if not sid:
            return None
        found = self.sessions.get(sid)
        if found is None or found.expires <= (time.time() if now is None else now):
            return None
        return found

    def logout(self, sid: str | None) -> None:
        if sid:
            self.sessions.pop(sid, None)

    @staticmethod
    def csrf_ok(session: Session, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), session.csrf.encode())
