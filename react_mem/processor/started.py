"""What a processor's ``start()`` opens, handed to its handlers as their first argument.

A processor declares its specs and handlers in ``__init__`` (without I/O: the topology is
read from processors built without a bus) and opens what its handlers use (a store, a
ledger, a model) in ``start()``, all at once, as one immutable value. Handlers run only
while flows run, between ``start()`` and ``stop()``; :class:`Started` is the one place that
tells one reached outside that span (:class:`~react_mem.errors.NotStarted`, redelivered).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from react_mem.errors import NotStarted

if TYPE_CHECKING:
    from react_mem.processor.context import MessageContext

S = TypeVar("S")
M = TypeVar("M")


class Started(Generic[S]):
    """Holds the opened state ``S`` of ``owner`` from :meth:`open` until :meth:`close`."""

    __slots__ = ("_state", "owner")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._state: S | None = None

    @property
    def state(self) -> S:
        if self._state is None:
            raise NotStarted(f"{self.owner}: not started")
        return self._state

    def open(self, state: S) -> S:
        self._state = state
        return state

    def close(self) -> S | None:
        """The state, forgotten (None if it was not open): the caller closes what it holds."""
        state, self._state = self._state, None
        return state

    def bind(
        self, handler: Callable[[S, M, MessageContext], Awaitable[None]]
    ) -> Callable[[M, MessageContext], Awaitable[None]]:
        """``handler`` as a spec's handler: called with the opened state first."""

        async def bound(message: M, ctx: MessageContext) -> None:
            await handler(self.state, message, ctx)

        return bound
