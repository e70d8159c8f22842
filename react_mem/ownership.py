"""One owner per directory: an exclusive ``flock`` on ``owner.lock`` that holds its pid.

The lock ends with its process (the kernel drops it), so a crashed owner never leaves a
stale lock behind; a second opener is refused at once with the owner's pid named.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from react_mem.errors import ConfigurationError

LOCK_NAME = "owner.lock"


class DirectoryInUse(ConfigurationError):
    """Another process owns the directory: retrying in this process cannot help."""


class DirectoryOwner:
    """Held from :meth:`take` until :meth:`release` (or the end of the process)."""

    def __init__(self, directory: Path, what: str) -> None:
        self.directory, self.what = directory, what
        self._handle: IO[str] | None = None

    def take(self) -> DirectoryOwner:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / LOCK_NAME
        handle = open(path, "a+")  # noqa: SIM115 - held until release(); "a+" keeps the pid
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            pid = handle.read().strip() or "unknown"
            handle.close()
            raise DirectoryInUse(
                f"{self.what} {self.directory} is in use by another react-mem process "
                f"(pid {pid}): stop it first, or use another directory"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
