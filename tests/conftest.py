"""Shared fixtures: a real embedded broker per test session, fresh metrics registries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One pulsar-lite broker for the session; tests isolate themselves by unique names."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker")) as running:
        yield running


@pytest.fixture
async def transport(broker: EmbeddedBroker) -> AsyncIterator[PulsarTransport]:
    bus = PulsarTransport(PulsarOptions(url=broker.url, nack_delay=0.05, connect_timeout=10))
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
