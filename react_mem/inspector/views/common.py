"""What every view shares: whose memory a page shows, rendering, and the mutation guard."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from react_mem.inspector.auth import CSRF_FIELD, CSRF_HEADER, Gate
from react_mem.inspector.backend import Memory, Where
from react_mem.schema.scope import Scope

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
#: The longest id (workspace, flow, collection, user, conversation) a page accepts.
MAX_ID = 256


def _when(value: float | None) -> str:
    if not value:
        return "—"
    return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    return env


ENV = _env()


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose memory a page shows: the flow, the collection and the user ("": no user, the
    collection's shared memory). Defaults are the CLI's."""

    workspace: str = "default"
    flow: str = "default"
    collection: str = "default"
    user: str = ""

    @property
    def where(self) -> Where:
        return Where(self.workspace, self.flow)

    def scope(self, conversation: str | None = None) -> Scope:
        return Scope(self.workspace, self.collection, self.user or None, conversation)

    def params(self, **more: Any) -> dict[str, str]:
        values = {
            "workspace": self.workspace,
            "flow": self.flow,
            "collection": self.collection,
            "user": self.user,
        }
        return values | {k: str(v) for k, v in more.items() if v is not None and v != ""}

    def query(self, **more: Any) -> str:
        return urlencode(self.params(**more))


def _text(values: Mapping[str, Any], name: str, default: str = "") -> str:
    """A field as given: ids are opaque (``" "`` is a user), so nothing is trimmed."""
    value = values.get(name)
    text = value if isinstance(value, str) else default
    if len(text) > MAX_ID:
        raise HTTPException(400, f"{name} is longer than {MAX_ID} characters")
    return text


def owner_of(values: Mapping[str, Any]) -> Owner:
    """The owner named by a query string or a form (empty workspace, flow, collection:
    the defaults)."""
    return Owner(
        workspace=_text(values, "workspace") or "default",
        flow=_text(values, "flow") or "default",
        collection=_text(values, "collection") or "default",
        user=_text(values, "user"),
    )


def param(values: Mapping[str, Any], name: str, default: str = "") -> str:
    return _text(values, name, default)


def memory(request: Request) -> Memory:
    found: Memory = request.app.state.memory
    return found


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    session = getattr(request.state, "session", None)
    body = ENV.get_template(template).render(
        request=request,
        csrf=session.csrf if session is not None else "",
        csrf_field=CSRF_FIELD,
        status=status,
        **context,
    )
    return HTMLResponse(body, status_code=status)


async def mutation(request: Request) -> FormData:
    """The form of a state-changing request, once its CSRF token is checked (a session's
    request without the right one is refused; a bearer request has no session)."""
    form = await request.form()
    session = getattr(request.state, "session", None)
    if session is not None:
        given = form.get(CSRF_FIELD)
        token = given if isinstance(given, str) else request.headers.get(CSRF_HEADER)
        gate: Gate = request.app.state.gate
        if not gate.csrf_ok(session, token):
            raise HTTPException(403, "the form's CSRF token is missing or wrong: reload the page")
    return form


def back(path: str, owner: Owner, **more: Any) -> Response:
    """After a change, the page that shows it (POST, then GET)."""
    return RedirectResponse(f"{path}?{owner.query(**more)}", status_code=303)
