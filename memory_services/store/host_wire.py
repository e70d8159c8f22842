"""What crosses the pipe between a hosted edge store and its child (:mod:`.hosted`,
:mod:`.host`): length-prefixed pickles of the store's own plain types, never the engine's.

Both ends are this package run by the same interpreter (the child is started by its
parent with ``sys.executable``), so a pickle is trusted like the index builder's pages.
An error raised in the child crosses as itself when it pickles (the project's errors do),
else as a :class:`TransientError` naming it; either way its traceback in the child is
attached as the ``__cause__`` (:class:`RemoteTraceback`), as ``concurrent.futures`` does.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
import traceback
from typing import Any

from react_mem.errors import TransientError

_LENGTH = struct.Struct(">I")

#: Parent to child: (call id, method, args, kwargs). Child to parent: ("ok", id, result),
#: ("err", id, error), or ("indexed", collection, seconds), an index run's news.
Request = tuple[int, str, tuple[Any, ...], dict[str, Any]]
Reply = tuple[str, Any, Any]


class RemoteTraceback(Exception):
    """The traceback of an error raised in the store's child process."""


def frame(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> Any:
    """The next message; raises ``asyncio.IncompleteReadError`` at the end of the stream."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(length))


def error(exc: BaseException) -> tuple[bytes | None, str]:
    """An error as it crosses: itself pickled (None if it cannot be), and its traceback."""
    text = "".join(traceback.format_exception(exc))
    body: bytes | None = None
    try:
        body = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(body)  # one that pickles but cannot be rebuilt crosses as its text
    except Exception:  # noqa: BLE001 - any error unpicklable crosses as its text
        body = None
    return body, text


def raised(crossed: tuple[bytes | None, str]) -> BaseException:
    """The error to raise for one that crossed (see :func:`error`)."""
    body, text = crossed
    exc: BaseException | None = None
    if body is not None:
        try:
            exc = pickle.loads(body)
        except Exception:  # noqa: BLE001 - then as its text
            exc = None
    if not isinstance(exc, BaseException):
        last = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        exc = TransientError(f"edge store host: {last}")
    exc.__cause__ = RemoteTraceback(text)
    return exc
