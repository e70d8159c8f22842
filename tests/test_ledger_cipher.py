"""The learner's ledger keeps no user's words in the clear (issue 26, finding 7): plans,
trajectories and reflections are sealed (AES-GCM) in its SQLite file and write-ahead log;
they read back whole with the key, not at all with another, and forgetting still finds a
user's rows by their plain owner columns. Real SQLite files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from react_mem.errors import ConfigurationError
from react_mem.learner.cipher import LedgerCipher, load_key
from react_mem.learner.ledger import TrajectoryLedger

SSN = "536-22-8741"
KEY = "k" * 40


def on_disk(directory: Path, text: str) -> list[str]:
    return [p.name for p in directory.iterdir() if p.is_file() and text.encode() in p.read_bytes()]


async def test_the_ledger_file_and_its_wal_hold_no_raw_text(tmp_path: Path) -> None:
    ledger = TrajectoryLedger(tmp_path / "l.sqlite3", cipher=LedgerCipher(KEY))
    await ledger.open()
    try:
        plan = {"facts": [f"The user's SSN is {SSN}."]}
        await ledger.save_plan("ws", "trajectory:s1", plan, collection="c", user="ada")
        body = json.dumps({"question": f"remember my SSN {SSN}", "user": "ada", "collection": "c"})
        await ledger.save_trajectory("ws", "s1", body, collection="c", user="ada")
        await ledger.add_reflection("ws", '["c", "", "ada"]', "trajectory:s1", f"SSN {SSN}")
        assert on_disk(tmp_path, SSN) == [] and on_disk(tmp_path, "ada") != []  # owners plain
        entry = await ledger.get("ws", "trajectory:s1")
        assert entry is not None and entry.plan == plan
        assert await ledger.trajectory("ws", "s1") == body
        assert await ledger.reflections("ws", '["c", "", "ada"]', 5) == [f"SSN {SSN}"]
        removed = await ledger.forget("ws", "c", "ada")
        assert removed == {"ledger": 1, "trajectories": 1, "reflections": 1}
    finally:
        await ledger.close()


async def test_another_key_opens_nothing_and_plain_rows_from_before_still_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.sqlite3"
    before = TrajectoryLedger(path)  # a ledger written before encryption
    await before.open()
    await before.save_trajectory("ws", "old", '{"user": "bob"}')
    await before.close()
    ledger = TrajectoryLedger(path, cipher=LedgerCipher(KEY))
    await ledger.open()
    try:
        assert await ledger.trajectory("ws", "old") == '{"user": "bob"}'
        assert (await ledger.forget("ws", "", "bob"))["trajectories"] == 1
        await ledger.save_trajectory("ws", "new", "secret words", user="ada")
    finally:
        await ledger.close()
    other = TrajectoryLedger(path, cipher=LedgerCipher("x" * 40))
    await other.open()
    try:
        with pytest.raises(ConfigurationError, match="does not open"):
            await other.trajectory("ws", "new")
    finally:
        await other.close()


def test_a_generated_key_is_kept_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "learner" / "ledger.key"
    key = load_key(None, path)
    assert len(key) >= 32 and load_key(None, path) == key
    assert os.stat(path).st_mode & 0o777 == 0o600
    with pytest.raises(ConfigurationError, match="ledger_key"):
        LedgerCipher("short")
