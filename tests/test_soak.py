"""The soak benchmark runs the whole stack (a very short version here, in both modes): it
completes, prints a line a minute and its verdict, and loses nothing (every ask answered and
learned, every stored fact there). Its figures are not asserted: speed is for the benchmark
to print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parent.parent


#: Steady mode (users forgotten, data expiring) with fewer users and shorter lives than the
#: defaults, so that users are forgotten within the run but the forgets (one per lifetime /
#: users) do not queue up at this scale; and the growth mode.
MODES = {
    "steady": ["--users", "12", "--lifetime", "20", "--warmup", "2"],
    "growth": ["--mode", "growth"],
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_short_soak_completes_and_loses_nothing(mode: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    args = ["--minutes", "3", "--minute", "7", "--rate", "3", *MODES[mode]]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    assert [line[:10] for line in out.splitlines() if line.startswith("minute")] == [
        f"minute {n:>3}" for n in (1, 2, 3)
    ], out
    assert "failed operations 0; lost 0" in out, out
    assert any(line.startswith(f"verdict ({mode}): ") for line in out.splitlines()), out
    forgotten = int(out.split("users forgotten ")[1].split()[0])
    if mode == "steady":  # users left and were forgotten everywhere, without a failure
        assert forgotten > 0, out
    else:
        assert forgotten == 0, out
