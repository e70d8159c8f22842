"""Deploying on RabbitMQ: the compose file's ``rabbitmq`` profile and the chart's
``bus: rabbitmq`` put every processor on RabbitMQ with TrustGraph's variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from react_mem.bus.rabbitmq_backend import options
from react_mem.processor.runtime import resolve_processor
from tests.test_deploy_compose import compose, container_settings, react_mem_services
from tests.test_deploy_helm import render, workloads

ROOT = Path(__file__).resolve().parent.parent
RABBITMQ = {
    "bus": "rabbitmq",
    "rabbitmq": {
        "host": "rabbitmq.mq.svc.cluster.local",
        "port": 5673,
        "vhost": "tg",
        "username": "react-mem",
        "passwordSecret": {"name": "mq-credentials", "key": "password"},
    },
}


def clear_bus_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("REACT_MEM_", "PULSAR_", "RABBITMQ_", "QDRANT_", "OPENAI_")):
            monkeypatch.delenv(key)
    monkeypatch.delenv("PUBSUB_BACKEND", raising=False)


def test_the_compose_profile_runs_rabbitmq_permitting_trustgraphs_queues() -> None:
    service = compose()["services"]["rabbitmq"]
    assert service["profiles"] == ["rabbitmq"]
    assert service["image"].startswith("rabbitmq:4.1")  # TrustGraph's templates pin 4.1
    (conf,) = [v for v in service["volumes"] if "conf.d" in v]
    text = (ROOT / conf.split(":")[0]).read_text()
    assert "deprecated_features.permit.transient_nonexcl_queues = true" in text


@pytest.mark.parametrize("name", sorted(react_mem_services()))
def test_compose_processors_take_the_backend_from_pubsub_backend(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_bus_environment(monkeypatch)
    _, default = container_settings(react_mem_services()[name], monkeypatch)
    assert default.pubsub_backend == "pulsar"  # unchanged unless asked
    clear_bus_environment(monkeypatch)
    service = react_mem_services()[name]
    service["environment"]["PUBSUB_BACKEND"] = (
        "rabbitmq"  # `PUBSUB_BACKEND=rabbitmq docker compose`
    )
    _, settings = container_settings(service, monkeypatch)
    assert settings.pubsub_backend == "rabbitmq"
    opts = options(settings)
    assert (opts.host, opts.port, opts.username, opts.vhost) == ("rabbitmq", 5672, "guest", "/")


def test_helm_bus_rabbitmq_sets_trustgraphs_variables_on_every_processor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = render(RABBITMQ)
    for name, workload in workloads(docs).items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        env: dict[str, Any] = {e["name"]: e for e in container["env"]}
        assert "PULSAR_HOST" not in env, name
        assert env["RABBITMQ_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": "mq-credentials",
            "key": "password",
        }
        with monkeypatch.context() as patch:
            clear_bus_environment(patch)
            for entry in container["env"]:
                patch.setenv(entry["name"], entry.get("value", "from-a-secret"))
            cls = resolve_processor(container["args"][1])
            settings = cls.Settings.load({"id": container["args"][3]})
        assert settings.pubsub_backend == "rabbitmq", name
        opts = options(settings)
        assert (opts.host, opts.port, opts.vhost, opts.username, opts.password) == (
            "rabbitmq.mq.svc.cluster.local",
            5673,
            "tg",
            "react-mem",
            "from-a-secret",
        ), name
        assert opts.prefetch == settings.concurrency


def test_helm_default_bus_is_still_pulsar() -> None:
    for workload in workloads(render()).values():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        names = {e["name"] for e in container["env"]}
        assert "PULSAR_HOST" in names and "PUBSUB_BACKEND" not in names


def test_helm_refuses_an_unknown_bus() -> None:
    with pytest.raises(Exception, match="bus"):
        render({"bus": "kafka"})
