"""Choosing RabbitMQ: TrustGraph's flags, variables and defaults, its names for exchanges
and queues, and a client that finds no broker told what to do."""

from __future__ import annotations

import argparse

import pytest

from react_mem.bus.backends import add_bus_args, describe_bus, open_bus
from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.bus.rabbitmq import exchange_name, is_dead_letter, queue_name
from react_mem.bus.rabbitmq_backend import options
from react_mem.bus.transport import BrokerNotRunning
from react_mem.errors import ConfigurationError
from react_mem.processor.settings import BusSettings, ProcessorSettings
from tests.support.rabbitmq import _free_port

VARIABLES = ["RABBITMQ_HOST", "RABBITMQ_PORT", "RABBITMQ_USERNAME", "RABBITMQ_PASSWORD"]


def parse(*argv: str) -> BusSettings:
    parser = argparse.ArgumentParser()
    add_bus_args(parser)
    return BusSettings.load(vars(parser.parse_args(argv)))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*VARIABLES, "RABBITMQ_VHOST", "PUBSUB_BACKEND"]:
        monkeypatch.delenv(name, raising=False)


def test_trustgraphs_defaults() -> None:
    opts = options(parse("--pubsub-backend", "rabbitmq"))
    assert (opts.host, opts.port, opts.username, opts.password, opts.vhost) == (
        "rabbitmq",
        5672,
        "guest",
        "guest",
        "/",
    )


def test_every_flag_lands_in_the_options() -> None:
    settings = parse(
        "--pubsub-backend",
        "rabbitmq",
        "--rabbitmq-host",
        "mq.internal",
        "--rabbitmq-port",
        "5673",
        "--rabbitmq-username",
        "tg",
        "--rabbitmq-password",
        "secret",
        "--rabbitmq-vhost",
        "trustgraph",
    )
    opts = options(settings)
    assert (opts.host, opts.port, opts.username, opts.password, opts.vhost) == (
        "mq.internal",
        5673,
        "tg",
        "secret",
        "trustgraph",
    )
    assert describe_bus(settings) == "RabbitMQ at amqp://mq.internal:5673/trustgraph"
    assert "secret" not in describe_bus(settings)


def test_every_variable_lands_in_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in zip(VARIABLES, ["env-host", "5674", "u", "p"], strict=True):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PUBSUB_BACKEND", "rabbitmq")
    settings = BusSettings.load({})
    assert settings.pubsub_backend == "rabbitmq"
    opts = options(settings)
    assert (opts.host, opts.port, opts.username, opts.password) == ("env-host", 5674, "u", "p")


def test_a_bad_port_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigurationError, match="rabbitmq_port"):
        parse("--rabbitmq-port", "99999")


def test_prefetch_is_the_processors_concurrency() -> None:
    settings = ProcessorSettings.load({"id": "p", "concurrency": 7, "pubsub_backend": "rabbitmq"})
    assert options(settings).prefetch == 7


@pytest.mark.parametrize(
    ("queue_id", "exchange"),
    [
        # TrustGraph 2.11's names (trustgraph-base, async_rabbitmq_backend.py).
        ("request:tg:agent", "tg.request.agent"),
        ("flow:tg:text-completion:default", "tg.flow.text-completion:default"),
        ("response:tg:agent", "tg.response.agent"),
        ("notify:tg:config", "tg.notify.config"),
    ],
)
def test_queues_map_onto_trustgraphs_exchanges(queue_id: str, exchange: str) -> None:
    parsed = Queue.parse(queue_id)
    assert exchange_name(parsed) == exchange
    assert queue_name(parsed, "sub") == f"{exchange}.sub"


def test_only_dead_letter_queues_are_held() -> None:
    source = Queue.parse("flow:tg:in")
    assert is_dead_letter(dead_letter_queue(source, "proc--default--f--input"))
    assert not is_dead_letter(source)


async def test_a_client_is_told_when_no_broker_is_there() -> None:
    settings = parse(
        "--pubsub-backend",
        "rabbitmq",
        "--rabbitmq-host",
        "127.0.0.1",
        "--rabbitmq-port",
        str(_free_port()),
    )
    with pytest.raises(BrokerNotRunning, match=r"no RabbitMQ broker at amqp://127\.0\.0\.1"):
        async with open_bus(settings, start_embedded=False):
            pass
