"""The embedded broker runs ahead of the process that starts it (every hop of every message
waits on it): with less niceness under the normal policy, one real-time priority higher
under a real-time one. Real broker; needs the right to raise a priority (root or
``CAP_SYS_NICE``), else skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from react_mem.bus.embedded import AHEAD_NICE, EmbeddedBroker

pytestmark = [
    pytest.mark.broker,
    pytest.mark.skipif(sys.platform != "linux", reason="priorities are Linux's here"),
]


def may_raise_priority() -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, -1)"],
        check=False,
        capture_output=True,
    )
    return probe.returncode == 0


needs_the_right = pytest.mark.skipif(
    not may_raise_priority(), reason="this user may not raise a priority"
)


@needs_the_right
def test_under_the_normal_policy_the_broker_is_less_nice(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker") as broker:
        assert broker.pid is not None
        assert os.sched_getscheduler(broker.pid) == os.SCHED_OTHER
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, broker.pid) == max(ours - AHEAD_NICE, -20)


OWNER = """
import os, sys
from pathlib import Path
from react_mem.bus.embedded import EmbeddedBroker
with EmbeddedBroker(Path(sys.argv[1])) as broker:
    print(os.sched_getscheduler(broker.pid), os.sched_getparam(broker.pid).sched_priority)
"""


@needs_the_right
def test_under_a_real_time_policy_the_broker_is_one_priority_up(tmp_path: Path) -> None:
    def real_time() -> None:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))

    done = subprocess.run(
        [sys.executable, "-c", OWNER, str(tmp_path / "broker")],
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=real_time,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        timeout=60,
    )
    assert done.stdout.split() == [str(os.SCHED_RR), "2"]
