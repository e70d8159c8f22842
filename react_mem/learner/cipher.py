"""The ledger's texts encrypted at rest (AES-256-GCM), so its file, its write-ahead log and
any copy of them hold no user's words in the clear.

The learner keeps plans (LLM output made from a user's words), trajectories (for feedback)
and reflections for its retention period; before, its SQLite file and WAL held them raw
(an SSN said once was found 35 times). Each text is sealed with a random nonce and bound
to its row (table, workspace, key) as associated data, so a sealed text moved to another
row does not open. The key is ``ledger_key`` (a secret shared through config), else one
generated once and kept in ``ledger_key_file`` (default: beside the ledger, mode 0600;
point it at a secret mount to keep key and data apart). Rows written before encryption
(plain JSON) are still read.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from react_mem.errors import ConfigurationError

PREFIX = "enc1:"
MIN_KEY_CHARS = 32
_NONCE = 12


class LedgerCipher:
    def __init__(self, key: str) -> None:
        if len(key) < MIN_KEY_CHARS:
            raise ConfigurationError(
                f"setting 'ledger_key': at least {MIN_KEY_CHARS} characters (got {len(key)})"
            )
        self._aead = AESGCM(hashlib.sha256(key.encode("utf-8")).digest())

    def seal(self, text: str, *row: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._aead.encrypt(nonce, text.encode("utf-8"), _bound(row))
        return PREFIX + base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, stored: str, *row: str) -> str:
        """The text sealed for ``row``; a plain (older) text as it is."""
        if not stored.startswith(PREFIX):
            return stored
        raw = base64.b64decode(stored[len(PREFIX) :])
        try:
            return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _bound(row)).decode("utf-8")
        except InvalidTag:
            raise ConfigurationError(
                "a ledger text does not open with this ledger_key (another key, or moved "
                "between rows)"
            ) from None


def _bound(row: tuple[str, ...]) -> bytes:
    return "\x00".join(row).encode("utf-8")


def load_key(given: str | None, path: Path) -> str:
    """``given``, else the key in ``path``, created there (mode 0600) if absent; processors
    sharing a state dir race safely: the first link wins and the others read it."""
    if given is not None:
        return given
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(48) + "\n")
    try:
        os.link(fresh, path)
    except FileExistsError:
        pass
    finally:
        fresh.unlink()
    return path.read_text().strip()
