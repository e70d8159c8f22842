"""helm/react-mem: rendered and linted by Helm's own Go SDK (helm-python-sdk), manifests
validated against Kubernetes' schemas (kubernetes-validate) and the Prometheus Operator's
CRD models (cloudcoil), and the result checked against the processors themselves: their
settings read from the rendered environment, their specs from the rendered flow file."""

from __future__ import annotations

import base64
import copy
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as prometheus_operator
from prometheus_client import CollectorRegistry

from memory_services.runtime import MemorySettings
from react_mem.agent.config import AgentMemConfig
from react_mem.agent.seal import StateSealer
from react_mem.agent.tools import tools_from_config
from react_mem.bus.embedded import EmbeddedBroker
from react_mem.cli import build_parser
from react_mem.processor.config_source import read_config_file
from react_mem.processor.flow import FlowDefinition
from react_mem.processor.runtime import registered_processors, resolve_processor
from react_mem.processor.settings import BusSettings
from tests.support.kinds import SOURCES
from tests.test_trustgraph_config import check_flow

CHART = Path(__file__).resolve().parent.parent / "helm" / "react-mem"
VALUES_FILES = ["values-small.yaml", "values-large.yaml"]
#: The chart's minimum (Chart.yaml kubeVersion) and the newest kubernetes-validate knows.
KUBE_VERSIONS = ["1.27.0", kubernetes_validate.latest_version()]
#: react-mem processors the chart does not deploy, and why.
NOT_DEPLOYED = {
    "ping": "a diagnostic",
    "text-completion-llama-cpp": "an alternative text-completion backend (processors.text-completion.run)",
}
SECRETISH = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
WORKLOADS = {"Deployment", "StatefulSet"}


def values_file(name: str) -> dict[str, Any]:
    return yaml.safe_load((CHART / name).read_text())  # type: ignore[no-any-return]


def render(values: dict[str, Any] | None = None, release: str = "rm") -> list[dict[str, Any]]:
    """``helm template RELEASE . --namespace ai`` with ``values``: the manifests, parsed."""
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values or {}, name=release, namespace="ai")
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def effective(values: dict[str, Any]) -> dict[str, Any]:
    """The values an install uses: the chart's defaults under ``values``."""
    with helm.Chart.load(CHART) as chart:
        return chart.merge_values(values)  # type: ignore[no-any-return]


def of_kind(docs: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in kinds]


def workloads(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Deployments and StatefulSets by processor (their component label)."""
    return {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in of_kind(docs, *WORKLOADS)
    }


def containers(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for workload in of_kind(docs, *WORKLOADS):
        yield from workload["spec"]["template"]["spec"]["containers"]


def flow_file(docs: list[dict[str, Any]]) -> str:
    (config_map,) = [
        d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-flows")
    ]
    return config_map["data"]["flows.yaml"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=VALUES_FILES)
def installation(request: pytest.FixtureRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    values = values_file(request.param)
    return effective(values), render(values)


# -- Helm ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUES_FILES)
def test_chart_lints_clean(name: str) -> None:
    report = helm.lint(CHART, values_file(name), strict=True, kube_version="v1.33.0")
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []


def test_lint_reports_bad_values() -> None:
    report = helm.lint(CHART, {"flows": {"source": "zookeeper"}}, kube_version="v1.33.0")
    assert report["errors"] or any(m["severity"] == 3 for m in report["messages"])


# -- Kubernetes schemas ----------------------------------------------------------------


def validate(doc: dict[str, Any], version: str) -> None:
    """Kubernetes' schema for core kinds (strict: unknown fields fail); the Prometheus
    Operator's CRDs are not in it, so those go through its CRD models, where a field the
    model drops on a round trip is an unknown one."""
    if doc["apiVersion"] == "monitoring.coreos.com/v1":
        model = getattr(prometheus_operator, doc["kind"]).model_validate(doc)
        assert model.model_dump(by_alias=True, exclude_unset=True, mode="json") == doc
    else:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_manifests_validate(
    installation: tuple[dict[str, Any], list[dict[str, Any]]], version: str
) -> None:
    _, docs = installation
    for doc in docs:
        validate(doc, version)


def test_validation_rejects_broken_manifests() -> None:
    docs = render(values_file("values-large.yaml"))
    deployment = copy.deepcopy(of_kind(docs, "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment, KUBE_VERSIONS[-1])
    monitor = copy.deepcopy(of_kind(docs, "ServiceMonitor")[0])
    monitor["spec"]["endpoints"][0]["intervall"] = "15s"
    with pytest.raises(AssertionError):
        validate(monitor, KUBE_VERSIONS[-1])


def test_names_fit_kubernetes_limits_for_the_longest_release_name() -> None:
    release = "r" * 53  # Helm's longest
    every = {
        "processors": {"config-service": {"enabled": True}},
        "podDisruptionBudget": {"enabled": True},
    }
    docs = render(every, release)
    for doc in docs:
        name = doc["metadata"]["name"]
        assert len(name) <= 63, name  # DNS labels (Services)
        if doc["kind"] == "StatefulSet":
            assert len(name) <= 52, name  # name + revision hash fits a label value


# -- what is deployed ----------------------------------------------------------------


def test_every_processor_is_deployed(
    installation: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    values, docs = installation
    enabled = {name for name, p in values["processors"].items() if p["enabled"]}
    deployed = workloads(docs)
    assert set(deployed) == enabled
    runs = {p.get("run", name) for name, p in values["processors"].items()}
    assert set(registered_processors()) - runs == set(NOT_DEPLOYED), (
        "a processor has no place in the chart"
    )
    for name, workload in deployed.items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        p = values["processors"][name]
        assert container["args"] == ["run", p.get("run", name), "--id", p["id"]]
        resolve_processor(container["args"][1])
        assert workload["spec"]["replicas"] == p["replicas"]
        assert container["resources"] == p["resources"]
    services = {
        s["metadata"]["labels"]["app.kubernetes.io/component"] for s in of_kind(docs, "Service")
    }
    assert services == enabled


def test_replicas_follow_the_values_file() -> None:
    small = workloads(render(values_file("values-small.yaml")))
    large = workloads(render(values_file("values-large.yaml")))
    assert {w["spec"]["replicas"] for w in small.values()} == {1}
    for name in (
        "agent-mem",
        "fact-memory",
        "conversation-memory",
        "episode-memory",
        "playbook-memory",
    ):
        assert large[name]["spec"]["replicas"] > 1, name
    # The learner's exactly-once ledger is per replica: one, on its own volume.
    assert large["memory-learner"]["spec"]["replicas"] == 1
    for deployed in (small, large):
        learner = deployed["memory-learner"]
        assert learner["kind"] == "StatefulSet"
        (claim,) = learner["spec"]["volumeClaimTemplates"]
        assert claim["metadata"]["name"] == "state"
        volumes = {v["name"] for v in learner["spec"]["template"]["spec"]["volumes"]}
        assert "state" not in volumes, "the claim, not an emptyDir, holds the state dir"
    scaled = workloads(render({"processors": {"agent-mem": {"replicas": 7}}}))
    assert scaled["agent-mem"]["spec"]["replicas"] == 7


def test_monitoring_objects_only_when_asked() -> None:
    small, large = (
        render(values_file("values-small.yaml")),
        render(values_file("values-large.yaml")),
    )
    assert of_kind(small, "ServiceMonitor", "PrometheusRule", "PodDisruptionBudget") == []
    (monitor,) = of_kind(large, "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    scraped = [
        s for s in of_kind(large, "Service") if selector.items() <= s["metadata"]["labels"].items()
    ]
    assert len(scraped) == len(workloads(large))
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}
    pdbs = {
        p["metadata"]["labels"]["app.kubernetes.io/component"]
        for p in of_kind(large, "PodDisruptionBudget")
    }
    assert pdbs == {n for n, w in workloads(large).items() if w["spec"]["replicas"] > 1}


def test_probes_and_non_root(installation: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    values, docs = installation
    port = values["metrics"]["port"]
    for workload in of_kind(docs, *WORKLOADS):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            assert container["ports"] == [
                {"name": "metrics", "containerPort": port, "protocol": "TCP"}
            ]
            for probe in ("startupProbe", "livenessProbe"):
                assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, probe
            # Not ready while its broker is unreachable (react_mem/processor/endpoint.py).
            ready = container["readinessProbe"]["httpGet"]
            assert ready == {"path": "/healthz", "port": "metrics"}
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]


# -- credentials -------------------------------------------------------------------------


def secret_env(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Credential env vars: name -> the Secrets they come from. Fails on a plain value."""
    found: dict[str, set[str]] = {}
    for container in containers(docs):
        for env in container["env"]:
            if SECRETISH.search(env["name"]):
                assert "value" not in env, f"{env['name']} is a plain value"
                found.setdefault(env["name"], set()).add(env["valueFrom"]["secretKeyRef"]["name"])
    return found


def test_the_agent_waits_for_stored_turns_where_conversation_memory_has_replicas() -> None:
    """Replicas of conversation-memory share a subscription, each ordering only what it
    receives: the agent's answer then waits for its turn stored (``turn_wait: reply``)."""

    def turn_wait(docs: list[dict[str, Any]]) -> str | None:
        (agent,) = workloads(docs)["agent-mem"]["spec"]["template"]["spec"]["containers"]
        found = [e.get("value") for e in agent["env"] if e["name"] == "REACT_MEM_TURN_WAIT"]
        return found[0] if found else None

    assert turn_wait(render(values_file("values-small.yaml"))) is None  # the default: sent
    assert turn_wait(render(values_file("values-large.yaml"))) == "reply"
    one = {"processors": {"conversation-memory": {"replicas": 1}}}
    assert turn_wait(render(one)) is None
    chosen = {
        "processors": {
            "conversation-memory": {"replicas": 3},
            "agent-mem": {"settings": {"turn-wait": "sent"}},  # partitioned, say
        }
    }
    assert turn_wait(render(chosen)) == "sent"


def test_no_credentials_by_default_and_one_memory_state_key_for_every_agent(
    installation: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    """The only Secret is the chart's random key sealing the agent's memory state, which
    every agent-mem replica reads (issue 13)."""
    _, docs = installation
    (secret,) = of_kind(docs, "Secret")
    name = secret["metadata"]["name"]
    assert name.endswith("-memory-state-key")
    StateSealer(base64.b64decode(secret["data"]["memory-state-key"]).decode())
    assert secret_env(docs) == {"REACT_MEM_MEMORY_STATE_KEY": {name}}


def test_credentials_come_from_existing_secrets() -> None:
    docs = render(
        {
            "pulsar": {"apiKeySecret": {"name": "pulsar-token", "key": "token"}},
            "qdrant": {"apiKeySecret": {"name": "qdrant", "key": "api-key"}},
            "llm": {"apiKeySecret": {"name": "openai", "key": "key"}},
            "memoryStateKeySecret": {"name": "agent", "key": "sealing-key"},
        }
    )
    assert of_kind(docs, "Secret") == []
    assert secret_env(docs) == {
        "PULSAR_API_KEY": {"pulsar-token"},
        "QDRANT_API_KEY": {"qdrant"},
        "OPENAI_API_KEY": {"openai"},
        "REACT_MEM_MEMORY_STATE_KEY": {"agent"},
    }
    deployed = workloads(docs)
    for name, workload in deployed.items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        names = {e["name"] for e in container["env"]}
        assert "PULSAR_API_KEY" in names
        assert ("QDRANT_API_KEY" in names) == (
            name in {"fact-memory", "episode-memory", "conversation-memory", "playbook-memory"}
        )
        assert ("OPENAI_API_KEY" in names) == (name == "text-completion")
        assert ("REACT_MEM_MEMORY_STATE_KEY" in names) == (name == "agent-mem")


def test_chart_secret_only_when_explicitly_asked() -> None:
    docs = render({"createSecret": {"enabled": True, "openaiApiKey": "sk-test"}})
    sealing, secret = sorted(of_kind(docs, "Secret"), key=lambda d: "credentials" in str(d))
    assert set(secret["data"]) == {"openaiApiKey"}
    assert secret_env(docs) == {
        "OPENAI_API_KEY": {secret["metadata"]["name"]},
        "REACT_MEM_MEMORY_STATE_KEY": {sealing["metadata"]["name"]},
    }


@pytest.mark.parametrize(
    "values",
    [
        {"pulsar": {"apiKey": "plain"}},
        {"qdrant": {"apiKey": "plain"}},
        {"llm": {"apiKey": "plain"}},
        {"extraEnv": [{"name": "OPENAI_API_KEY", "value": "plain"}]},
        {"processors": {"text-completion": {"settings": {"api_key": "plain"}}}},
    ],
)
def test_schema_refuses_plain_credentials(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        render(values)


# -- the processors read what the chart renders --------------------------------------------


def test_processors_read_their_settings_from_the_rendered_env(
    installation: tuple[dict[str, Any], list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    values, docs = installation
    for name, workload in workloads(docs).items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        with monkeypatch.context() as env:
            for var in list(os.environ):
                if var.startswith(("REACT_MEM_", "PULSAR_", "QDRANT_", "OPENAI_")):
                    env.delenv(var)
            for entry in container["env"]:
                env.setenv(entry["name"], entry.get("value", "from-a-secret"))
            cls = resolve_processor(container["args"][1])
            settings = cls.Settings.load({"id": container["args"][3]})
        p = values["processors"][name]
        assert settings.pulsar_host == values["pulsar"]["url"]
        assert settings.metrics_port == values["metrics"]["port"]
        assert settings.concurrency == p["concurrency"]
        assert str(settings.state_dir) == "/var/lib/react-mem"
        if isinstance(settings, MemorySettings):
            assert settings.vector_store == "qdrant", "memory services use the Qdrant server"
            assert settings.qdrant_url == values["qdrant"]["url"]
        if name == "text-completion":
            assert settings.base_url == values["llm"]["baseUrl"]  # type: ignore[attr-defined]
            assert settings.model == values["llm"]["model"]  # type: ignore[attr-defined]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert settings.flows is not None and str(settings.flows.parent) in mounts


def test_rendered_flow_file_wires_every_processor(
    installation: tuple[dict[str, Any], list[dict[str, Any]]], tmp_path: Path
) -> None:
    values, docs = installation
    path = tmp_path / "flows.yaml"
    path.write_text(flow_file(docs))
    config = read_config_file(path)
    (workspace,) = config
    assert config[workspace]["agent-mem"]  # the agent's settings travel with the flows
    for flow_name in values["flows"]["names"]:
        flow = {}
        for name, workload in workloads(docs).items():
            (container,) = workload["spec"]["template"]["spec"]["containers"]
            key = f"processor:{values['processors'][name]['id']}"
            entry = FlowDefinition.parse(key, config[workspace][key][flow_name])
            flow[container["args"][1]] = entry.topics
        check_flow(flow)


def test_agent_settings_and_tools_reach_the_agent_as_config_strings(tmp_path: Path) -> None:
    lookup = {"type": "knowledge-query", "name": "Lookup", "description": "Ask the graph"}
    docs = render(
        {"agentMem": {"max-iterations": 6, "reply-format": "json"}, "tools": {"lookup": lookup}}
    )
    path = tmp_path / "flows.yaml"
    path.write_text(flow_file(docs))
    (config,) = read_config_file(path).values()
    parsed = AgentMemConfig.parse(config["agent-mem"], keys=SOURCES.keys)
    assert parsed.max_iterations == 6 and parsed.reply_format == "json"
    assert parsed.fact_retrieval_top_k == 20  # the chart's default, as the agent's
    (tool,) = tools_from_config(config["tool"]).values()
    assert tool.name == "Lookup" and tool.config == lookup


def test_trustgraph_mode_takes_flows_from_the_bus() -> None:
    docs = render(
        {
            "flows": {"source": "config-service"},
            "processors": {"text-completion": {"enabled": False}},
        }
    )
    assert [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-flows")] == []
    assert "text-completion" not in workloads(docs)
    for container in containers(docs):
        assert "REACT_MEM_FLOWS" not in {e["name"] for e in container["env"]}


def test_own_config_service_is_seeded_from_the_flow_file() -> None:
    docs = render(
        {"flows": {"source": "config-service"}, "processors": {"config-service": {"enabled": True}}}
    )
    service = workloads(docs)["config-service"]
    assert service["kind"] == "StatefulSet" and service["spec"]["replicas"] == 1
    (container,) = service["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["REACT_MEM_SEED"] == "/etc/react-mem/flows.yaml"
    assert "processor:agent-mem" in yaml.safe_load(flow_file(docs))["default"]
    with pytest.raises(helm.HelmError, match="replicas must be 1"):
        render({"processors": {"config-service": {"enabled": True, "replicas": 2}}})


def test_learner_needs_the_memory_services_it_writes_to() -> None:
    with pytest.raises(helm.HelmError, match="memory-learner writes through episode-memory"):
        render({"processors": {"episode-memory": {"enabled": False}}})
    docs = render(
        {"processors": {"episode-memory": {"enabled": False}, "memory-learner": {"enabled": False}}}
    )
    agent = yaml.safe_load(flow_file(docs))["default"]["processor:agent-mem"]["default"]["topics"]
    assert "episode-memory-request" not in agent and "trajectory" not in agent


# -- a rendered container, run ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return response.read().decode()  # type: ignore[no-any-return]
    except OSError:
        return ""


@pytest.mark.broker
@pytest.mark.parametrize("name", ["text-completion", "memory-learner"])
def test_rendered_container_runs_and_answers_its_probe(
    broker: EmbeddedBroker, tmp_path: Path, unique: str, name: str
) -> None:
    """The container's args and env as rendered (the bus, state dir and metrics port moved
    to this machine): the processor starts its flow from the rendered flow file, /metrics
    (what the probes GET) shows its consumers running, and SIGTERM stops it cleanly."""
    workspace = f"helm{unique}"
    docs = render({"flows": {"workspace": workspace}})
    (container,) = workloads(docs)[name]["spec"]["template"]["spec"]["containers"]
    flows = tmp_path / "flows.yaml"
    flows.write_text(flow_file(docs))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REACT_MEM_", "PULSAR_"))}
    env |= {e["name"]: e.get("value", "from-a-secret") for e in container["env"]}
    env |= {
        "PULSAR_HOST": broker.url,
        "REACT_MEM_FLOWS": str(flows),
        "REACT_MEM_STATE_DIR": str(tmp_path / "state"),
        "REACT_MEM_METRICS_PORT": str(port),
    }
    probe = container["livenessProbe"]["httpGet"]["path"]
    assert probe == "/metrics"
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "react_mem.cli", *container["args"]],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        consumer = (
            "request:tg:text-completion"
            if name == "text-completion"
            else "flow:tg:agent-trajectory"
        )
        running = f'consumer="{consumer}:{workspace}:default",processor="{container["args"][3]}",tg_consumer_state="running"}} 1.0'
        deadline = time.monotonic() + 90
        while running not in scrape(port):
            assert process.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the flow never started"
            time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, log.read_text()[-2000:]
    if name == "memory-learner":
        assert list((tmp_path / "state" / "learner").glob("*.sqlite3")), (
            "the ledger is in the state dir"
        )


# -- alerts ---------------------------------------------------------------------------------


def exported_metrics() -> set[str]:
    """Sample names every react-mem processor's registry defines at construction."""
    names = {"up"}  # Prometheus' own, per scrape target
    for run in set(registered_processors()) - set(NOT_DEPLOYED):
        cls = resolve_processor(run)
        registry = CollectorRegistry()
        cls(cls.Settings.load({"id": cls.default_id}), None, registry=registry)  # type: ignore[arg-type]
        for family in registry.collect():
            suffixes = {
                "counter": ["_total"],
                "histogram": ["_bucket", "_sum", "_count"],
                "info": ["_info"],
            }.get(family.type, [""])
            names |= {family.name + s for s in suffixes}
    return names


def test_alerts_query_metrics_the_processors_export() -> None:
    (rule,) = of_kind(render(values_file("values-large.yaml")), "PrometheusRule")
    exported = exported_metrics()
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            queried = set(re.findall(r"\b(tg_[a-z_]+|up)\{", alert["expr"]))
            assert queried, alert["alert"]
            assert queried <= exported, f"{alert['alert']}: {queried - exported}"


def test_pulsar_tls_comes_from_existing_secrets_mounted_as_files() -> None:
    tls = {"trustCertsSecret": {"name": "pulsar-ca", "key": "ca.pem"}, "clientCertSecret": "mtls"}
    docs = render({"pulsar": {"url": "pulsar+ssl://broker:6651", "tls": tls}})
    for name, workload in workloads(docs).items():
        pod = workload["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["PULSAR_TLS_TRUST_CERTS_FILE"] == "/etc/pulsar-tls/ca/ca.pem", name
        assert env["PULSAR_TLS_VALIDATE_HOSTNAME"] == "true"
        assert env["PULSAR_TLS_CERT_FILE"] == "/etc/pulsar-tls/client/tls.crt"
        assert env["PULSAR_TLS_KEY_FILE"] == "/etc/pulsar-tls/client/tls.key"
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts["pulsar-ca"] == "/etc/pulsar-tls/ca"
        assert mounts["pulsar-client-cert"] == "/etc/pulsar-tls/client"
        secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        assert secrets == {"pulsar-ca": "pulsar-ca", "pulsar-client-cert": "mtls"}
        # What the processor makes of that environment.
        settings = BusSettings.load({k: v for k, v in env.items() if k.startswith("PULSAR_")})
        assert settings.pulsar_tls_trust_certs_file == "/etc/pulsar-tls/ca/ca.pem"
        assert settings.pulsar_tls_validate_hostname is True
    # Without TLS values nothing is mounted and host names stay checked.
    for workload in workloads(render()).values():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert not {m["name"] for m in container["volumeMounts"]} & {
            "pulsar-ca",
            "pulsar-client-cert",
        }


# -- the inspector ---------------------------------------------------------------------------


def test_inspector_only_when_enabled_and_only_with_a_token_secret() -> None:
    """Off by default; on, a Deployment and a ClusterIP Service running ``react-mem inspect``
    on the chart's bus, its token from an existing Secret (issue 27)."""
    assert "inspector" not in {d["metadata"]["name"].rsplit("-", 1)[-1] for d in render()}
    with pytest.raises(Exception, match="tokenSecret"):
        render({"inspector": {"enabled": True}})
    values = {
        "inspector": {"enabled": True, "tokenSecret": {"name": "inspector-token", "key": "t"}},
        "pulsar": {"apiKeySecret": {"name": "pulsar-key", "key": "k"}},
    }
    docs = render(values)
    for doc in docs:
        validate(doc, KUBE_VERSIONS[-1])
    named = [d for d in docs if d["metadata"]["name"].endswith("-inspector")]
    assert sorted(d["kind"] for d in named) == ["Deployment", "Service"]
    deployment, service = sorted(named, key=lambda d: d["kind"])
    assert service["spec"]["type"] == "ClusterIP"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.host, args.port) == ("inspect", "0.0.0.0", 8700)
    env = {e["name"]: e for e in container["env"]}
    assert env["REACT_MEM_INSPECTOR_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "inspector-token",
        "key": "t",
    }
    assert "value" not in env["PULSAR_API_KEY"]  # the bus as every processor has it
    assert env["PULSAR_HOST"]["value"] == effective(values)["pulsar"]["url"]
    assert container["readinessProbe"]["httpGet"]["port"] == "http"
