"""The embedded broker: a ``pulsar-lite`` process owned by this react-mem process.

pulsar-lite's own launcher logs to a fixed path under /tmp and its broker binds a
metrics listener on 0.0.0.0:8080; we start the binary ourselves with a config that turns
that listener off (or, with ``metrics_port``, binds it to the broker's host) and a log file
under the data directory. A lock file makes one process
the owner of a data directory; others find the running broker through ``broker.url``.
Known gap: two processes consuming one subscription collide on pulsar-lite, so on the
embedded default all consumers of a subscription live in one process (a processor group).
The broker runs a step ahead of its owner's priority (:func:`ahead_of_owner`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import IO, Self

from pulsar_lite.binary_finder import find_pulsar_lite_binary

from react_mem.bus import health as bus_health
from react_mem.bus.embedded_disk import BrokerDisk
from react_mem.errors import BusError, NotStarted

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1

#: A broker that dies more than this many times within ``RESTART_WINDOW`` seconds is given
#: up on: the process stops with an error instead of restarting it forever.
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0

_CONFIG = """\
# Written by react-mem for its embedded broker.
log_level = "{log_level}"
# A non-persistent message is dropped when its consumer's connection is not writable; one
# connection carries every consumer of a process, so a burst of big messages (prompts,
# provenance) to one made the others lose replies. 32 MiB holds several 5 MiB messages.
pulsar_channel_write_buffer_high_water_mark_bytes = 33554432
pulsar_channel_write_buffer_low_water_mark_bytes = 16777216

[metrics]
{metrics}
"""


#: How far ahead of its owner the broker runs: this much less niceness, or under a
#: real-time policy one priority higher (see :func:`ahead_of_owner`).
AHEAD_NICE = 5


def _child_setup() -> None:
    """Runs in the child before exec: on Linux, SIGTERM the broker if its owner dies, and
    run it ahead of its owner."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        ahead_of_owner()


def ahead_of_owner() -> None:
    """Put the calling process (the broker, before its exec) ahead of the one it was
    forked from: every message of every process waits on the broker's few microseconds of
    work, and behind a service's CPU-bound thread (a turn's PII screen, a search) each hop
    waited for a core. Under a real-time policy (a stack started with ``chrt``) a thread of
    equal priority never preempts a running one, so the broker takes the next priority up;
    under the normal policy, :data:`AHEAD_NICE` less niceness, where the process may
    (``CAP_SYS_NICE``); else it stays where it was."""
    with contextlib.suppress(OSError, AttributeError):
        policy = os.sched_getscheduler(0)
        if policy in (os.SCHED_RR, os.SCHED_FIFO):
            priority = os.sched_getparam(0).sched_priority
            if priority < os.sched_get_priority_max(policy):
                os.sched_setscheduler(0, policy, os.sched_param(priority + 1))
            return
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) - AHEAD_NICE)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def running_broker_url(data_dir: Path) -> str | None:
    """The URL of an embedded broker another process owns in ``data_dir``, if one answers."""
    url_file = data_dir / "broker.url"
    try:
        url = url_file.read_text().strip()
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=0.5):
            return url
    except (OSError, ValueError):
        return None


class EmbeddedBroker:
    """Start with :meth:`start` (or ``with``); :meth:`stop` ends the process cleanly."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_timeout: float = 20.0,
        log_level: str = "warn",
        metrics_port: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.host, self.port = host, port
        self.ready_timeout = ready_timeout
        self.log_level = log_level
        #: Where the broker serves its Prometheus metrics (on ``host``; None: off), e.g.
        #: ``pulsar_lite_subscription_dropped_messages_total``, what a non-persistent
        #: subscription lost for want of permits (benchmarks).
        self.metrics_port = metrics_port
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise NotStarted("embedded broker is not started")
        return f"pulsar://{self.host}:{self.port}"

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        process, port = self._spawn()
        atexit.register(self.stop)
        try:
            self._wait_ready(process, port)
        except BusError:
            self.stop()
            raise
        (self.data_dir / "broker.url").write_text(self.url + "\n")
        logger.info("embedded broker at %s, data in %s", self.url, self.data_dir)
        return self.url

    def exit_code(self) -> int | None:
        """The broker's exit status once it has exited on its own; None while it runs
        (or after :meth:`stop`)."""
        return None if self._process is None else self._process.poll()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def restart(self) -> None:
        """Start the broker again on the same address and data (after it died): clients
        reconnect to it by themselves. The lock stays held throughout."""
        if self._process is not None and self._process.poll() is None:
            return
        if self._lock is None:
            raise BusError("embedded broker was stopped; it is not restarted")
        self._wait_ready(*self._spawn())
        logger.warning("embedded broker restarted at %s", self.url)

    def recycle(self) -> None:
        """Stop the broker and start it again on the same address and data: what clears a
        log it tore on a full disk (:mod:`.embedded_disk`)."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.restart()

    def _spawn(self) -> tuple[subprocess.Popen[bytes], int]:
        config = self.data_dir / "pulsar-lite.toml"
        metrics = "enabled = false"
        if self.metrics_port is not None:
            metrics = f'enabled = true\naddr = "{self.host}:{self.metrics_port}"'
        config.write_text(_CONFIG.format(log_level=self.log_level, metrics=metrics))
        if self._log is None:
            self._log = open(self.data_dir / "broker.log", "ab")  # noqa: SIM115 - lives with the process
        port = self.port or _free_port(self.host)
        process = subprocess.Popen(
            [
                find_pulsar_lite_binary(),
                "--config",
                str(config),
                "--addr",
                f"{self.host}:{port}",
                "--db-path",
                str(self.data_dir / "data"),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.data_dir,
            # Its own session: a Ctrl-C or SIGTERM to our process group must not stop the
            # broker before our clients close; we stop it last, in stop().
            start_new_session=True,
            preexec_fn=_child_setup,
        )
        self._process, self.port = process, port
        (self.data_dir / "broker.pid").write_text(f"{process.pid}\n")
        return process, port

    def _take_lock(self) -> None:
        lock = open(self.data_dir / "broker.lock", "w")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise BusError(
                f"another process owns the embedded broker in {self.data_dir}; "
                f"connect to it with --pulsar-host {running_broker_url(self.data_dir) or '<url>'}"
            ) from None
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def _wait_ready(self, process: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BusError(
                    f"embedded broker exited with {process.returncode}; "
                    f"see {self.data_dir / 'broker.log'}"
                )
            try:
                with socket.create_connection((self.host, port), timeout=0.25):
                    return
            except OSError:
                time.sleep(0.05)
        raise BusError(f"embedded broker did not accept connections in {self.ready_timeout}s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        (self.data_dir / "broker.url").unlink(missing_ok=True)
        (self.data_dir / "broker.pid").unlink(missing_ok=True)
        for handle in (self._log, self._lock):
            if handle is not None:
                handle.close()
        self._log = self._lock = None
        atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def keep_embedded(
    broker: EmbeddedBroker,
    health: bus_health.BusHealth,
    *,
    max_restarts: int | None = None,
    window: float | None = None,
    disk: BrokerDisk | None = None,
) -> None:
    """Keep the embedded broker running until cancelled: restart it when it dies; after
    ``max_restarts`` deaths within ``window`` seconds, give up (``health.lost``). With
    ``disk``: the bus is down while the broker's disk is full, and the broker is restarted
    once space is back (see :mod:`.embedded_disk`)."""
    max_restarts = MAX_RESTARTS if max_restarts is None else max_restarts
    window = RESTART_WINDOW if window is None else window
    deaths: deque[float] = deque()
    health.mark_up()
    while True:
        await asyncio.sleep(bus_health.health_interval())
        code = broker.exit_code()
        if code is None:
            if disk is not None:
                await _mind_disk(broker, health, disk)
            continue
        health.mark_down(f"embedded broker exited with status {code}")
        now = time.monotonic()
        deaths.append(now)
        while deaths and now - deaths[0] > window:
            deaths.popleft()
        if len(deaths) > max_restarts:
            health.give_up(
                BusError(
                    f"the embedded broker died {len(deaths)} times in {window:.0f}s (last "
                    f"status {code}); giving up, see {broker.data_dir / 'broker.log'}"
                )
            )
            return
        try:
            await asyncio.to_thread(broker.restart)
        except BusError as exc:
            logger.error("restarting the embedded broker failed: %s", exc)
            continue
        health.mark_up()


async def _mind_disk(
    broker: EmbeddedBroker, health: bus_health.BusHealth, disk: BrokerDisk
) -> None:
    """Down while the broker's disk is full; restarted (and up) once space is back."""
    reason = disk.low()
    if reason is not None:
        health.mark_down(reason)
        return
    if not disk.torn:
        return
    disk.mark()  # now that there is room for it, if there was none before
    try:
        await asyncio.to_thread(broker.recycle)
    except BusError as exc:
        logger.error("restarting the embedded broker after a full disk failed: %s", exc)
        return
    disk.clear()
    logger.warning("embedded broker restarted after its disk had filled; publishes resume")
    health.mark_up()
