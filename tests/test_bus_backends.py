"""Choosing the broker: ``pubsub_backend`` as TrustGraph names it, every Pulsar flag and
variable as before, and a framework that reaches a broker only through the registry."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from react_mem.bus.backends import BACKENDS, add_bus_args, describe_bus, open_bus
from react_mem.bus.pulsar import PulsarOptions, tls_args
from react_mem.bus.transport import BrokerNotRunning
from react_mem.errors import ConfigurationError
from react_mem.processor.settings import BusSettings

ROOT = Path(__file__).resolve().parent.parent

#: The modules that may name a broker's client library or modules: the brokers' own.
BROKER_MODULES = {
    "pulsar",
    "_pulsar",
    "pulsar_lite",
    "react_mem.bus.pulsar",
    "react_mem.bus.embedded",
    "react_mem.bus.pulsar_backend",
    "faststream",
    "aio_pika",
    "aiormq",
    "react_mem.bus.rabbitmq",
    "react_mem.bus.rabbitmq_backend",
}
ALLOWED = {
    "react_mem/bus/pulsar.py",
    "react_mem/bus/pulsar_calls.py",
    "react_mem/bus/embedded.py",
    "react_mem/bus/pulsar_backend.py",
    "react_mem/bus/rabbitmq.py",
    "react_mem/bus/rabbitmq_backend.py",
    "react_mem/bus/backends.py",
}


def parse(*argv: str) -> BusSettings:
    parser = argparse.ArgumentParser()
    add_bus_args(parser)
    return BusSettings.load(vars(parser.parse_args(argv)))


def test_pulsar_is_the_default_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUBSUB_BACKEND", raising=False)
    assert parse().pubsub_backend == "pulsar"


def test_the_backend_comes_from_the_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse("--pubsub-backend", "pulsar").pubsub_backend == "pulsar"
    monkeypatch.setenv("PUBSUB_BACKEND", "pulsar")
    assert BusSettings.load({}).pubsub_backend == "pulsar"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_unknown_backend_is_refused_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    argv = ["--pubsub-backend", "kafka"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("PUBSUB_BACKEND", "kafka")
    with pytest.raises(ConfigurationError, match=r"pubsub_backend.*'kafka'.*pulsar"):
        parse(*argv)


def test_every_pulsar_flag_still_lands_in_the_settings() -> None:
    settings = parse(
        "-p", "pulsar://broker:6650", "--pulsar-api-key", "tok", "--pulsar-listener", "ext"
    )
    assert (settings.pulsar_host, settings.pulsar_api_key, settings.pulsar_listener) == (
        "pulsar://broker:6650",
        "tok",
        "ext",
    )
    assert describe_bus(settings) == "pulsar://broker:6650"


def test_every_pulsar_variable_still_lands_in_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULSAR_HOST", "pulsar://env:6650")
    monkeypatch.setenv("PULSAR_API_KEY", "tok")
    monkeypatch.setenv("PULSAR_LISTENER", "ext")
    settings = BusSettings.load({})
    assert (settings.pulsar_host, settings.pulsar_api_key, settings.pulsar_listener) == (
        "pulsar://env:6650",
        "tok",
        "ext",
    )


async def test_a_client_never_starts_the_embedded_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULSAR_HOST", raising=False)
    settings = BusSettings.load({"state_dir": tmp_path})
    assert describe_bus(settings).startswith("embedded broker")
    with pytest.raises(BrokerNotRunning, match="react-mem up"):
        async with open_bus(settings, start_embedded=False):
            pass
    assert not (tmp_path / "broker").exists()


def test_only_the_brokers_own_modules_import_a_broker() -> None:
    crossings = []
    for path in sorted([*ROOT.glob("react_mem/**/*.py"), *ROOT.glob("memory_services/**/*.py")]):
        name = path.relative_to(ROOT).as_posix()
        if name in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), name)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            else:
                continue
            crossings += [
                f"{name}: {m}"
                for m in modules
                if any(m == b or m.startswith(f"{b}.") for b in BROKER_MODULES)
            ]
    assert crossings == []


def test_the_registry_names_each_backend_by_its_key() -> None:
    assert all(name == backend.name for name, backend in BACKENDS.items())


def test_pulsar_tls_settings_land_in_the_client_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULSAR_TLS_TRUST_CERTS_FILE", "/etc/pulsar/ca.pem")
    settings = parse(
        "-p",
        "pulsar+ssl://broker:6651",
        "--pulsar-tls-cert-file",
        "client.pem",
        "--pulsar-tls-key-file",
        "client.key",
        "--no-pulsar-tls-validate-hostname",
    )
    assert settings.pulsar_tls_trust_certs_file == "/etc/pulsar/ca.pem"
    assert (settings.pulsar_tls_cert_file, settings.pulsar_tls_key_file) == (
        "client.pem",
        "client.key",
    )
    options = PulsarOptions(
        url="pulsar+ssl://broker:6651",
        tls_trust_certs_file=settings.pulsar_tls_trust_certs_file,
        tls_validate_hostname=settings.pulsar_tls_validate_hostname,
    )
    assert tls_args(options) == {
        "tls_trust_certs_file_path": "/etc/pulsar/ca.pem",
        "tls_validate_hostname": False,
        "tls_allow_insecure_connection": False,
    }
    # By default host names are checked and certificates are never accepted unverified.
    assert parse().pulsar_tls_validate_hostname is True
    assert tls_args(PulsarOptions(url="pulsar+ssl://b:6651")) == {
        "tls_validate_hostname": True,
        "tls_allow_insecure_connection": False,
    }
