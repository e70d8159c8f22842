"""What every typed client shares: its service's spec names and schemas, and one call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar

from pydantic import ValidationError

from react_mem.clients.errors import boundary, raise_for
from react_mem.errors import BadRequest
from react_mem.processor.flow import Flow
from react_mem.processor.specs import RequestResponseSpec
from react_mem.schema.base import WireModel
from react_mem.schema.scope import Scope

Req = TypeVar("Req", bound=WireModel)
Resp = TypeVar("Resp", bound=WireModel)
Req_contra = TypeVar("Req_contra", bound=WireModel, contravariant=True)
Resp_co = TypeVar("Resp_co", bound=WireModel, covariant=True)
M = TypeVar("M", bound=WireModel)
T = TypeVar("T")


class Requester(Protocol[Req_contra, Resp_co]):
    """The request/response seam (:class:`react_mem.bus.rpc.RequestResponseClient`)."""

    async def request(
        self,
        message: Req_contra,
        *,
        timeout: float | None = None,
        sent: Callable[[], None] | None = None,
    ) -> Resp_co:
        """``sent``: called once the bus has taken the request (before its reply)."""
        ...

    def stream(
        self,
        message: Req_contra,
        *,
        last: Callable[[Any], bool],
        timeout: float | None = None,
    ) -> AsyncIterator[Resp_co]: ...


@dataclass(frozen=True)
class Service(Generic[Req, Resp]):
    """A flow service as its clients see it: the spec names of its queues and its schemas.

    ``name`` is the service's name in its queues (``request:tg:{name}:{workspace}:{flow}``)
    and, with ``-request``/``-response``, the spec names in a flow definition's ``topics``.
    """

    name: str
    request_schema: type[Req]
    response_schema: type[Resp]

    @property
    def request(self) -> str:
        return f"{self.name}-request"

    @property
    def response(self) -> str:
        return f"{self.name}-response"

    def spec(
        self, *, timeout: float = 60.0, optional: bool = False, resend: float | None = None
    ) -> RequestResponseSpec:
        """The :class:`RequestResponseSpec` a processor declares to call this service."""
        return RequestResponseSpec(
            request=self.request,
            response=self.response,
            request_schema=self.request_schema,
            response_schema=self.response_schema,
            timeout=timeout,
            optional=optional,
            resend=resend,
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; ``next`` asks for the page after it (None: the last one)."""

    items: list[T]
    next: str | None = None


def owner(scope: Scope) -> dict[str, Any]:
    """The request fields that name ``scope``'s owner (the workspace is the flow's)."""
    return {
        "collection": scope.collection,
        "user": scope.user,
        "conversation_id": scope.conversation,
    }


def build(model: type[M], **fields: Any) -> M:
    """A request from typed arguments; arguments the schema refuses are a :class:`BadRequest`
    (``invalid``) naming each (``limit: Input should be ...``), raised before anything is sent."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or model.__name__}: {e['msg']}"
            for e in exc.errors()
        )
        raise BadRequest(problems, type="invalid") from exc


class ServiceClient(Generic[Req, Resp]):
    """One service's client over a :class:`Requester`; subclasses add a method per
    operation. Every call raises only :class:`~react_mem.errors.ReactMemError`s."""

    service: Service[Req, Resp]

    def __init__(self, rpc: Requester[Req, Resp], *, timeout: float | None = None) -> None:
        self._rpc = rpc
        self._timeout = timeout

    @classmethod
    def of(cls, flow: Flow, *, timeout: float | None = None) -> Self:
        """The client over ``flow``'s request/response client for this service."""
        return cls(flow.client(cls.service.request), timeout=timeout)

    @classmethod
    def available(cls, flow: Flow) -> bool:
        """Whether ``flow`` runs this (optional) service's client."""
        return flow.has_client(cls.service.request)

    async def call(
        self,
        request: Req,
        *,
        timeout: float | None = None,
        sent: Callable[[], None] | None = None,
    ) -> Resp:
        """Send ``request``; its reply, or the exception for its error (or for no reply).
        ``sent``: called once the bus has taken the request."""
        name = self.service.name
        timeout = timeout or self._timeout
        with boundary(name):
            if sent is None:  # a requester that never reports its sends need not take it
                response = await self._rpc.request(request, timeout=timeout)
            else:
                response = await self._rpc.request(request, timeout=timeout, sent=sent)
        raise_for(name, getattr(response, "error", None))
        return response
