"""The sessions ``react-mem ask`` answered, kept under the state directory, so that
``react-mem feedback --last`` can name the latest and an unknown session id is caught
before it is sent (the learner, on its queue, has no reply to give)."""

from __future__ import annotations

from pathlib import Path

#: Sessions kept, newest last.
KEEP = 1000


class SessionLog:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "cli" / "sessions"

    def _ids(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return []

    def record(self, session_id: str) -> None:
        ids = [*self._ids(), session_id][-KEEP:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("\n".join(ids) + "\n", encoding="utf-8")
        tmp.replace(self.path)

    def last(self) -> str | None:
        ids = self._ids()
        return ids[-1] if ids else None

    def known(self, session_id: str) -> bool:
        return session_id in self._ids()
