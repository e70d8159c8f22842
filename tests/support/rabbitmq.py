"""A private RabbitMQ node for tests: its own node name, AMQP, distribution and epmd ports,
data and log directories and Erlang cookie, started and stopped by the tests (like the
embedded Pulsar broker); restartable in place to test a broker restart.

One node per test run, shared by every module that uses :func:`rabbitmq_node` (a fixture
per module would start one each); it stops when the test process exits. Without the
``rabbitmq-server`` package the tests that need it skip, saying how to install it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from react_mem.bus.rabbitmq import RabbitMQOptions, RabbitMQTransport

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
INSTALL = (
    "RabbitMQ tests need the rabbitmq-server package: "
    "`apt-get install -y --no-install-recommends rabbitmq-server` (Debian/Ubuntu); "
    "the tests start their own private node, nothing needs to be running"
)
START_TIMEOUT = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _epmd() -> str | None:
    return shutil.which("epmd") or next(
        (str(p) for p in Path("/usr/lib/erlang").glob("erts-*/bin/epmd")), None
    )


class RabbitMQNode:
    """``start()``, ``stop()``, ``restart()``; the data survive a restart."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.name = f"react-mem-test-{uuid.uuid4().hex[:8]}@localhost"
        self.port, self.dist_port, self.epmd_port = _free_port(), _free_port(), _free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None

    @property
    def group(self) -> int:
        """The running node's process group (0 when stopped)."""
        return self._process.pid if self._process is not None else 0

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def options(self, **overrides: object) -> RabbitMQOptions:
        values: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "connect_timeout": 10.0,
            "nack_delay": 0.05,
            "prefetch": 50,
        }
        return RabbitMQOptions(**(values | overrides))  # type: ignore[arg-type]

    def transport(self, **overrides: object) -> RabbitMQTransport:
        return RabbitMQTransport(self.options(**overrides))

    def _env(self) -> dict[str, str]:
        home = self.base / "home"
        home.mkdir(parents=True, exist_ok=True)
        config = self.base / "rabbitmq.conf"
        config.write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            "loopback_users = none\n"
            "log.console = false\n"
        )
        plugins = self.base / "enabled_plugins"
        plugins.write_text("[].\n")
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),  # the Erlang cookie lives here
            "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.base / "log"),
            "RABBITMQ_LOGS": str(self.base / "log" / "rabbit.log"),
            "RABBITMQ_CONFIG_FILE": str(config),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.base / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
            "RABBITMQ_PID_FILE": str(self.base / "rabbit.pid"),
        }

    def start(self) -> None:
        if not SERVER.exists():
            pytest.skip(INSTALL)
        env = self._env()
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [str(SERVER)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._watch(self._process.pid)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited: see {self.log}")
            if self._listening():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"rabbitmq-server did not start in {START_TIMEOUT}s: see {self.log}")

    def _watch(self, group: int) -> None:
        """A watchdog that stops the node (and its epmd) if this process dies without
        stopping it (a killed test run), as the embedded broker dies with its owner."""
        epmd = _epmd() or "epmd"
        script = (
            f"while kill -0 {os.getpid()} 2>/dev/null && kill -0 {group} 2>/dev/null;"
            " do sleep 1; done;"
            f" kill -0 {os.getpid()} 2>/dev/null && exit 0;"
            f" kill -TERM -{group} 2>/dev/null; sleep 20; kill -KILL -{group} 2>/dev/null;"
            f" ERL_EPMD_PORT={self.epmd_port} {epmd} -kill >/dev/null 2>&1"
        )
        self._watchdog = subprocess.Popen(
            ["sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _listening(self) -> bool:
        rabbit_log = self.base / "log" / "rabbit.log"
        if not rabbit_log.exists() or "Server startup complete" not in rabbit_log.read_text(
            errors="replace"
        ):
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), the process group killed if it does not finish."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        if self._watchdog is not None:
            self._watchdog.wait(5)  # it ends once the node has
            self._watchdog = None
        # A restart must find the log line of its own start.
        with contextlib.suppress(FileNotFoundError):
            rabbit_log = self.base / "log" / "rabbit.log"
            rabbit_log.rename(rabbit_log.with_suffix(f".{time.time_ns()}"))

    def restart(self) -> None:
        self.stop()
        self.start()

    def shutdown(self) -> None:
        """Stop the node and the epmd it started on its private port."""
        self.stop()
        epmd = _epmd()
        if epmd is not None:
            subprocess.run(
                [epmd, "-kill"],
                env={"ERL_EPMD_PORT": str(self.epmd_port), "PATH": os.environ.get("PATH", "")},
                capture_output=True,
                check=False,
                timeout=10,
            )


def cli_bus_args(transport: object, pulsar_url: str) -> list[str]:
    """The command line's options for the broker ``transport`` is on: the RabbitMQ node's
    host and port on a RabbitMQ transport, else the Pulsar URL."""
    if isinstance(transport, RabbitMQTransport):
        options = transport.options
        return [
            "--pubsub-backend",
            "rabbitmq",
            "--rabbitmq-host",
            options.host,
            "--rabbitmq-port",
            str(options.port),
        ]
    return ["-p", pulsar_url]


_node: RabbitMQNode | None = None


def shared_node(tmp_path_factory: pytest.TempPathFactory) -> RabbitMQNode:
    """The test run's node, started on first use and shut down when the process exits."""
    global _node
    if _node is None:
        if not SERVER.exists():
            pytest.skip(INSTALL)
        node = RabbitMQNode(tmp_path_factory.mktemp("rabbitmq"))
        node.start()
        atexit.register(node.shutdown)
        _node = node
    return _node


@pytest.fixture(scope="session")
def rabbitmq_node(tmp_path_factory: pytest.TempPathFactory) -> RabbitMQNode:
    """Import into a test module to use the shared node."""
    return shared_node(tmp_path_factory)
