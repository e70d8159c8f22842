"""The README's main job: the two-session demo on the real stack, llama.cpp included.
Needs the local-llm extra (slow; skipped without it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

pytestmark = pytest.mark.slow


def test_the_demo_recalls_a_fact_from_one_conversation_in_another(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "react_mem.cli",
            "demo",
            "--state-dir",
            str(tmp_path),
            "--no-metrics",
            "-l",
            "WARNING",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if k != "PULSAR_HOST"},  # embedded
        check=False,
    )
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "[trip-planning] Agent (" in out and "[snacks] Agent (" in out
    assert "Traceback" not in out + run.stderr
    stored = out.split("What memory stored after session 1:")[1]
    assert "long-term fact: The user" in stored and "peanut" in stored.lower()
    recalled = out.split("What memory put into the prompt of session 2")[1]
    assert "fact:" in recalled and "peanut" in recalled.lower()
    assert "was recalled into the agent's prompt" in out
