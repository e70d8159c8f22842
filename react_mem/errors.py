"""The project's exception root and the errors that decide how a message is settled."""

from __future__ import annotations


class ReactMemError(Exception):
    """Root of every error react-mem raises on purpose."""


class BadRequest(ReactMemError):
    """The message is malformed or invalid: answered with an error, never retried."""

    def __init__(self, message: str, *, type: str = "bad-request") -> None:
        super().__init__(message)
        self.type = type


class TransientError(ReactMemError):
    """A dependency failed in a way worth retrying (broker, store, LLM unavailable)."""


class ConfigurationError(ReactMemError):
    """Settings or flow definitions are invalid; the message names the key."""


class BusError(TransientError):
    """The message bus could not be reached or refused an operation."""


class RequestTimeout(TransientError):
    """No response arrived for a request within its timeout."""
