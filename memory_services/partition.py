"""Partitioned replicas: several processes of one memory service, each with its own embedded
store, that split the owners between them.

An embedded store has one owner process, so replicas of a memory service cannot share one;
without a Qdrant server they can share the work by owner instead. Replica ``i`` of ``n``
(``partition: i/n``, each with its own processor id, hence its own store directory and its
own subscription) receives every request and serves those whose owner, the request's
workspace and user, hashes to ``i``; it settles the others without a word. Everything an
owner has (every collection and conversation, and ``forget``) lives in one partition, so
every operation is answered by exactly one replica. Changing ``n`` moves owners: start the
new layout on new stores.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from react_mem.errors import ConfigurationError

_SPELLING = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class Partition:
    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Partition:
        """``"i/n"`` (``0 <= i < n``), or ``""`` for the whole (one partition)."""
        if not text:
            return cls()
        match = _SPELLING.fullmatch(text.strip())
        if match is None or not int(match[1]) < int(match[2]):
            raise ConfigurationError(f"partition {text!r}: expected i/n with 0 <= i < n")
        return cls(int(match[1]), int(match[2]))

    @property
    def whole(self) -> bool:
        return self.count == 1

    def owns(self, workspace: str, user: str | None) -> bool:
        """Whether this replica serves the owner (``None`` and ``""``: the shared memory)."""
        if self.whole:
            return True
        return of(workspace, user, self.count) == self.index


def of(workspace: str, user: str | None, count: int) -> int:
    """The partition of an owner among ``count``: stable across processes and versions."""
    key = f"{workspace}\0{user or ''}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % count
