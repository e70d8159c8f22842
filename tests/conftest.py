"""Shared fixtures: a real embedded broker per test session, fresh metrics registries."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.transport import Transport
from react_mem.metrics import families

BROKERS = ("pulsar", "rabbitmq")

# Generated examples are judged by what they do, not how fast: hypothesis's per-example
# deadline and its "too slow" health check depend on the machine's load, so the suite turns
# them off (the per-test timeout still ends a hang).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One pulsar-lite broker for the session; tests isolate themselves by unique names."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as running:
        yield running


@pytest.fixture
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    """A connected transport on the broker ``--broker`` picks (see :func:`brokers_chosen`)."""
    bus: Transport
    if getattr(request, "param", "pulsar") == "rabbitmq":
        from tests.support.rabbitmq import shared_node

        bus = shared_node(request.getfixturevalue("tmp_path_factory")).transport()
    else:
        url = request.getfixturevalue("broker").url
        bus = PulsarTransport(PulsarOptions(url=url, nack_delay=0.05, connect_timeout=10))
    await bus.connect()
    yield bus
    await bus.close()


@pytest.fixture(scope="session", autouse=True)
def memory_state_key_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Agents started by tests keep their generated sealing key here, not in the home dir."""
    path = tmp_path_factory.mktemp("agent") / "memory-state.key"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REACT_MEM_MEMORY_STATE_KEY_FILE", str(path))
        yield path


@pytest.fixture(autouse=True)
def trustgraph_metrics_released() -> Iterator[None]:
    """TrustGraph's own classes, used in-process as test peers, register metrics under the
    names react-mem shares with them in the global registry, once per class. Released after
    each test, so a later test's processors on the global registry do not collide with them
    (in a deployment the two never share a process). React-mem's own families under those
    names, made on the global registry by a test whose processors took none of their own, go
    too, or they would collide with TrustGraph's classes in whichever test runs next (the
    order differs with each ``-n`` worker's share of the suite)."""
    yield
    # TrustGraph's first: react-mem's families, made here on first use, would collide with them.
    module = sys.modules.get("trustgraph.base.metrics")
    for owner in vars(module).values() if module is not None else ():
        if not isinstance(owner, type):
            continue
        for name, value in list(vars(owner).items()):
            if isinstance(value, MetricWrapperBase):
                with contextlib.suppress(KeyError):
                    REGISTRY.unregister(value)
                delattr(owner, name)  # re-created (and registered) on its next use
    shared = families(REGISTRY)
    for field in dataclasses.fields(shared):
        with contextlib.suppress(KeyError):
            REGISTRY.unregister(getattr(shared, field.name))


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def unique() -> str:
    """A short unique token for queue and flow names, so tests never share a topic."""
    return uuid.uuid4().hex[:10]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-examples",
        type=int,
        default=15,
        help="rounds of generated hostile payloads at every queue (tests/test_fuzz_queues.py)",
    )
    parser.addoption(
        "--broker",
        choices=(*BROKERS, "both"),
        default=None,
        help="the broker(s) the tests' `transport` runs on (default: both where the "
        "rabbitmq-server package is installed, else pulsar); tests marked pulsar_only stay "
        "on Pulsar",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "pulsar_only(reason): needs Pulsar itself, not any transport (stays on Pulsar)"
    )


def brokers_chosen(config: pytest.Config) -> str:
    """``--broker``, or both brokers where RabbitMQ is installed (Pulsar is embedded)."""
    from tests.support import rabbitmq

    choice: str | None = config.getoption("broker")
    return choice or ("both" if rabbitmq.SERVER.exists() else "pulsar")


def pytest_report_header(config: pytest.Config) -> str:
    return f"broker: {brokers_chosen(config)}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Says so when the default left RabbitMQ out, and how to have it."""
    if config.getoption("broker") is None and brokers_chosen(config) == "pulsar":
        from tests.support import rabbitmq

        terminalreporter.write_line(f"Ran on Pulsar only. {rabbitmq.INSTALL}.")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Runs every test that takes ``transport`` on each broker ``--broker`` names, unless its
    module gives its own ``transport`` or it is marked ``pulsar_only``."""
    if "transport" not in metafunc.fixturenames or hasattr(metafunc.module, "transport"):
        return
    choice = brokers_chosen(metafunc.config)
    brokers = list(BROKERS) if choice == "both" else [choice]
    if metafunc.definition.get_closest_marker("pulsar_only") is not None:
        brokers = ["pulsar"]
    if brokers != ["pulsar"]:  # a Pulsar-only run keeps its test ids
        metafunc.parametrize(
            "transport",
            [
                pytest.param(b, marks=[pytest.mark.rabbitmq] if b == "rabbitmq" else [])
                for b in brokers
            ],
            indirect=True,
        )
