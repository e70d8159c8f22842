"""The compose deployment, checked without a container engine.

- ``docker-compose.yml`` validates with a real Compose parser (Debian's ``docker-compose``,
  installed by ``.ci/run``), and the environment it gives each service is the one this test
  reads;
- each react-mem container's command and environment make valid settings for its processor:
  the Pulsar and Qdrant servers, the metrics port, flows from the config service (every flow
  in ``config/flows/stack.yaml`` has its processor), a volume where state is kept;
- the Pulsar init step creates the tenant and namespaces react-mem's queues live in;
- Prometheus scrapes every processor service;
- every metric the Grafana dashboard and the alert rules query (parsed as PromQL) is one the
  processors really export, checked against a live scrape of the agent, the learner, the
  memory services, playbook-memory and the OpenAI-compatible text-completion processor.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from memory_services.runtime import MemorySettings
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue, QueueClass
from react_mem.bus.rpc import RequestResponseClient
from react_mem.cli import build_parser
from react_mem.config_service.service import ConfigServiceSettings
from react_mem.llm.openai_compat import OpenAICompatibleProcessor, OpenAISettings
from react_mem.processor.runtime import resolve_processor
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema import TextCompletionRequest, TextCompletionResponse
from tests.support import agent_stack
from tests.support.openai_server import OpenAIServer
from tests.support.ping import flow_file
from tests.support.recording import eventually

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
STACK_FLOWS = ROOT / "config" / "flows" / "stack.yaml"
PROMETHEUS = ROOT / "deploy" / "prometheus"
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "react-mem.json"

#: What the image sets (Dockerfile ENV) and every container therefore has.
STATE_DIR = "/var/lib/react-mem"
IMAGE_ENV = {"REACT_MEM_STATE_DIR": STATE_DIR, "REACT_MEM_METRICS_PORT": "8000"}
#: Environment names the settings read besides ``REACT_MEM_<field>``.
ALIASES = {
    "PUBSUB_BACKEND",
    "RABBITMQ_HOST",
    "RABBITMQ_PORT",
    "RABBITMQ_USERNAME",
    "RABBITMQ_PASSWORD",
    "RABBITMQ_VHOST",
    "PULSAR_HOST",
    "PULSAR_API_KEY",
    "PULSAR_TLS_TRUST_CERTS_FILE",
    "PULSAR_TLS_CERT_FILE",
    "PULSAR_TLS_KEY_FILE",
    "PULSAR_TLS_VALIDATE_HOSTNAME",
    "QDRANT_URL",
    "QDRANT_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
}
#: Series Prometheus itself makes (``up``) or scrapes from Pulsar, not from react-mem.
EXTERNAL = {"up", "pulsar_msg_backlog"}


# -- reading the compose file -----------------------------------------------------------------
_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>\w+)(?::-(?P<default>[^}]*))?\}")


def interpolate(value: Any) -> Any:
    """Compose's interpolation with nothing set: ``${VAR:-default}`` is the default."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: "$" if m[0] == "$$" else m["default"] or "", value)
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    return value


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = interpolate(yaml.safe_load(COMPOSE.read_text()))
    return loaded


def react_mem_services() -> dict[str, dict[str, Any]]:
    """The services built from this repository's Dockerfile: one processor each."""
    return {name: s for name, s in compose()["services"].items() if "build" in s}


def environment(service: dict[str, Any]) -> dict[str, str]:
    """Set variables only: a name without a value passes the host's through, if set."""
    return {k: str(v) for k, v in service.get("environment", {}).items() if v is not None}


def depends(service: dict[str, Any]) -> dict[str, str]:
    return {name: dep["condition"] for name, dep in service.get("depends_on", {}).items()}


def stack_processor_ids() -> set[str]:
    config = yaml.safe_load(STACK_FLOWS.read_text())["default"]
    return {kind.split(":", 1)[1] for kind in config if kind.startswith("processor:")}


# -- the compose file validates ---------------------------------------------------------------
def test_compose_validates_with_docker_compose() -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose (Debian's package, installed by .ci/run) is not installed")
    # Compose with nothing set, as this test reads the file: no variable it interpolates or
    # passes through comes from this machine.
    used = {m["name"] for m in _VARIABLE.finditer(COMPOSE.read_text()) if m["name"]}
    used |= {k for s in compose()["services"].values() for k in s.get("environment", {})}
    env = {k: v for k, v in os.environ.items() if k not in used}
    env["COMPOSE_PROJECT_NAME"] = "react-mem"

    def run(*args: str) -> str:
        done = subprocess.run(
            [binary, "-f", str(COMPOSE), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("config", "-q")
    resolved = yaml.safe_load(run("config"))["services"]
    assert set(resolved) == set(compose()["services"])
    # What this test reads from the file is what Compose makes of it.
    for name, service in react_mem_services().items():
        assert environment(resolved[name]) == environment(service), name
        assert resolved[name]["command"] == service["command"], name
        assert depends(resolved[name]) == depends(service), name


# -- each container's settings ----------------------------------------------------------------
def container_settings(
    service: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[type[ProcessorSettings], ProcessorSettings]:
    """The settings ``react-mem <command>`` builds inside the container, as the CLI does."""
    for key in list(os.environ):
        if key.startswith(("REACT_MEM_", "PULSAR_", "QDRANT_", "OPENAI_")):
            monkeypatch.delenv(key)
    for key, value in (IMAGE_ENV | environment(service)).items():
        monkeypatch.setenv(key, value)
    command = service["command"]
    assert command[0] == "run", command
    cls = resolve_processor(command[1])
    args = build_parser().parse_args(command)
    values = {k: v for k, v in vars(args).items() if k not in {"command", "settings", "processor"}}
    values.setdefault("id", cls.default_id)
    return cls.Settings, cls.Settings.load(values)


@pytest.mark.parametrize("name", sorted(react_mem_services()))
def test_container_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    service = react_mem_services()[name]
    settings_cls, settings = container_settings(service, monkeypatch)

    for key in environment(service):
        if key.startswith("REACT_MEM_"):  # a misspelt one would be ignored silently
            field = key.removeprefix("REACT_MEM_").lower()
            assert field in settings_cls.model_fields, f"{name}: {key} is no setting"
        else:
            assert key in ALIASES, f"{name}: {key} is read by nothing"

    assert settings.pulsar_host == "pulsar://pulsar:6650"
    # Bus credentials and TLS are passed through from the host only when set.
    assert settings.pulsar_api_key is None and settings.pulsar_tls_trust_certs_file is None
    assert settings.metrics and settings.metrics_port == 8000
    assert str(settings.state_dir) == STATE_DIR
    assert "pulsar-init" in depends(service)
    assert service["healthcheck"]["test"][-1].count(f":{settings.metrics_port}/metrics") == 1

    mounts = {m.split(":")[1]: m.split(":")[0] for m in service.get("volumes", [])}
    if isinstance(settings, ConfigServiceSettings):
        assert settings.seed is not None and settings.flows is None
        # The image copies config/ to /app/config.
        assert (ROOT / settings.seed.relative_to("/app")).resolve() == STACK_FLOWS
        assert mounts.get(str(settings.store_dir.parent)) == "config-state"
    else:
        # Flows come from the config service, which must be up first.
        assert settings.flows is None
        assert depends(service).get("config-service") == "service_healthy"
        assert settings.id in stack_processor_ids(), f"no processor:{settings.id} flows"
    if settings.id == "memory-learner":  # its exactly-once ledger lives in the state dir
        assert mounts.get(STATE_DIR) == "learner-state"
    if isinstance(settings, MemorySettings):
        # The Qdrant server: replicas share it, and nothing is kept in the container.
        assert settings.vector_store == "qdrant"
        assert settings.qdrant_url == "http://qdrant:6333"
        assert depends(service).get("qdrant") == "service_healthy"
    if isinstance(settings, OpenAISettings):
        assert settings.base_url == "http://ollama:11434/v1"
        assert settings.api_key is None  # passed through from the host only when set


def test_the_inspector_runs_from_the_image_on_the_stacks_bus_behind_loopback() -> None:
    """``react-mem inspect`` (issue 27): the image the processors use, the bus they use, its
    token passed through from the host, its port published on the host's loopback only."""
    services = compose()["services"]
    inspector = services["inspector"]
    assert "build" not in inspector  # a client, not a processor: no flows, no metrics
    assert inspector["image"] == services["agent-mem"]["image"]
    args = build_parser().parse_args(inspector["command"])
    assert (args.command, args.host, args.port) == ("inspect", "0.0.0.0", 8700)
    env = environment(inspector)
    assert env["PULSAR_HOST"] == "pulsar://pulsar:6650"
    assert "REACT_MEM_INSPECTOR_TOKEN" in inspector["environment"]
    assert "REACT_MEM_INSPECTOR_TOKEN" not in env  # never a value in the file
    assert inspector["ports"] == ["127.0.0.1:8700:8700"]
    assert depends(inspector)["config-service"] == "service_healthy"
    assert ":8700/static/style.css" in inspector["healthcheck"]["test"][-1]


def test_every_stack_flow_has_its_processor(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = {
        container_settings(service, monkeypatch)[1].id for service in react_mem_services().values()
    }
    missing = stack_processor_ids() - ids
    assert not missing, f"flows in config/flows/stack.yaml with no compose service: {missing}"


def test_image_sets_what_the_containers_rely_on() -> None:
    text = DOCKERFILE.read_text()
    for key, value in IMAGE_ENV.items():
        assert f"{key}={value}" in text
    for needed in ("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "COPY config /app/config"):
        assert needed in text
    assert re.search(r"^USER react-mem$", text, re.M)
    assert 'ENTRYPOINT ["react-mem"]' in text
    # The build context is an allow-list; the package and the config files are on it.
    allowed = (ROOT / ".dockerignore").read_text().split()
    for path in ("!pyproject.toml", "!README.md", "!react_mem/", "!memory_services/", "!config/"):
        assert path in allowed


# -- the Pulsar init step ---------------------------------------------------------------------
class AdminDouble:
    """Pulsar's admin REST API, as far as the init step uses it: records each PUT and
    answers 204, or 409 for a path seen before (what Pulsar says when it exists)."""

    def __init__(self, status: int | None = None) -> None:
        self.puts: dict[str, Any] = {}
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                code = status or (409 if self.path in double.puts else 204)
                double.puts[self.path] = body
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"

    @contextlib.contextmanager
    def running(self) -> Iterator[AdminDouble]:
        thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()


def run_init(url: str) -> subprocess.CompletedProcess[str]:
    service = compose()["services"]["pulsar-init"]
    assert service["entrypoint"] == ["/bin/sh", "-c"]
    script = service["command"][0].replace("http://pulsar:8080", url)
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)


def test_pulsar_init_creates_the_namespaces_of_every_queue() -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (the Pulsar image has it)")
    spaces = set()
    for kind, flows in yaml.safe_load(STACK_FLOWS.read_text())["default"].items():
        if kind.startswith("processor:"):
            for flow in flows.values():
                spaces |= {Queue.parse(q).topicspace for q in flow["topics"].values()}
    assert spaces == {"tg"}
    expected = {"/admin/v2/tenants/tg"} | {f"/admin/v2/namespaces/tg/{c}" for c in QueueClass}

    with AdminDouble().running() as admin:
        first, again = run_init(admin.url), run_init(admin.url)
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr  # 409: already there
    assert set(admin.puts) == expected
    assert admin.puts["/admin/v2/tenants/tg"] == {"allowedClusters": ["standalone"]}

    with AdminDouble(status=500).running() as broken:
        failed = run_init(broken.url)
    assert failed.returncode != 0 and "HTTP 500" in failed.stderr


# -- Prometheus and Grafana -------------------------------------------------------------------
def test_prometheus_scrapes_every_processor() -> None:
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    discovery = jobs["react-mem"]["dns_sd_configs"]
    names = {n for sd in discovery for n in sd["names"]}
    assert names == set(react_mem_services())
    assert {sd["port"] for sd in discovery} == {8000}
    assert all(sd["type"] == "A" for sd in discovery)  # every replica's address
    for name, service in react_mem_services().items():
        assert service["expose"] == ["8000"], name
    prometheus = compose()["services"]["prometheus"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    for rules in config["rule_files"]:
        assert (PROMETHEUS / Path(rules).relative_to("/etc/prometheus")).is_file()


def test_grafana_provisioning_and_dashboard_fit_together() -> None:
    datasources = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    uids = {d["uid"] for d in datasources["datasources"]}
    [source] = datasources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    providers = yaml.safe_load((GRAFANA / "provisioning/dashboards/react-mem.yml").read_text())
    grafana = compose()["services"]["grafana"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    for provider in providers["providers"]:
        assert mounted[provider["options"]["path"]] == "./deploy/grafana/dashboards"

    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"]["uid"] in uids, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in uids, panel["title"]
    for variable in dashboard["templating"]["list"]:
        assert variable["datasource"]["uid"] in uids
    # Every query is PromQL Prometheus accepts (parsing raises otherwise).
    assert queried(dashboard_queries())


# -- every queried metric is exported ---------------------------------------------------------
_GRAFANA_MACROS = re.compile(r"\$__(rate_interval|interval|range)|\$\{?\w+\}?")


def _promql(query: str) -> str:
    """A Grafana query as Prometheus gets it: intervals are durations, variables regexes."""
    return _GRAFANA_MACROS.sub(lambda m: "5m" if m[1] else ".*", query)


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]["query"]
        found = re.fullmatch(r"label_values\((?P<selector>.+),\s*\w+\)", query)
        queries.append(found["selector"] if found else query)
    return [_promql(q) for q in queries]


def alert_queries() -> list[str]:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def queried(queries: list[str]) -> set[str]:
    """The metric names ``queries`` select (each parsed as PromQL)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name: {node}"
            names.add(node.name)

    for query in queries:
        promql_parser.walk(promql_parser.parse(query), visit)
    return names


_SERIES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}


def exported(registry: CollectorRegistry) -> tuple[set[str], set[str]]:
    """Series names the registry exposes (families without samples yet included), and the
    names that have samples."""
    names: set[str] = set()
    sampled: set[str] = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        names |= {family.name + suffix for suffix in _SERIES.get(family.type, ("",))}
        sampled |= {s.name for s in family.samples}
    return names | sampled, sampled


def agent_script(request: TextCompletionRequest) -> str:
    if request.system.startswith("You are a helpful agent"):
        return "Thought: noted\nFinal Answer: You like green tea."
    return "{}"  # the learner's JSON questions: nothing useful, so it falls back


@pytest.mark.broker
async def test_dashboard_and_alerts_query_only_exported_metrics(
    transport: PulsarTransport, tmp_path: Path, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_services.playbook.service import PlaybookMemoryProcessor

    registry = CollectorRegistry()
    # One registry for the whole stack, so one scrape sees every processor's families.
    monkeypatch.setattr(agent_stack, "CollectorRegistry", lambda: registry)
    server = OpenAIServer()
    server.start()
    try:
        async with agent_stack.agent_stack(
            transport,
            tmp_path,
            unique,
            script=agent_script,
            learner=True,
            playbook=PlaybookMemoryProcessor,
        ) as stack:
            replies = await stack.ask(
                "Remember that I like green tea", user="ada", conversation_id=f"c-{unique}"
            )
            assert replies[-1].end_of_dialog and replies[-1].error is None
            trajectory = agent_stack.trajectory_queue(unique)
            learner = f"learner-{unique}"
            await eventually(
                lambda: bool(
                    registry.get_sample_value(
                        "tg_consumer_processing_total",
                        {"processor": learner, "consumer": trajectory, "status": "ok"},
                    )
                ),
                timeout=60,
            )
            await text_completion_once(transport, registry, tmp_path, unique, server)
    finally:
        server.stop()

    names, sampled = exported(registry)
    # The scrape is live: the stack handled a request and an LLM call.
    for name in (
        "tg_consumer_processing_total",
        "tg_consumer_request_duration_seconds_bucket",
        "tg_agent_session_total",
        "tg_agent_llm_duration_seconds_bucket",
        "tg_downstream_call_duration_seconds_bucket",
        "tg_llm_requests_total",
        "tg_memory_items",
    ):
        assert name in sampled, name
    assert "tg_playbook_changes_total" in names

    on_dashboard = queried(dashboard_queries())
    unknown = on_dashboard - names - {"up"}
    assert not unknown, f"the dashboard queries metrics nobody exports: {sorted(unknown)}"
    unknown = queried(alert_queries()) - names - EXTERNAL
    assert not unknown, f"the alerts query metrics nobody exports: {sorted(unknown)}"
    # What the dashboard is for: rates, latencies, memory, playbook changes, errors, sessions.
    assert on_dashboard >= {
        "tg_consumer_processing_total",
        "tg_consumer_request_duration_seconds_bucket",
        "tg_agent_llm_duration_seconds_bucket",
        "tg_downstream_call_duration_seconds_bucket",
        "tg_memory_items",
        "tg_playbook_changes_total",
        "tg_consumer_dead_letter_total",
        "tg_downstream_error_total",
        "tg_llm_requests_total",
        "tg_agent_session_total",
    }


async def text_completion_once(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    """One request through the OpenAI-compatible processor, as compose runs it."""
    pid = f"tc-{unique}"
    topics = {"request": f"request:tg:tc-{unique}", "response": f"response:tg:tc-{unique}"}
    settings = OpenAISettings.load(
        {"id": pid, "flows": flow_file(tmp_path, pid, topics), "base_url": server.url}
    )
    processor = OpenAICompatibleProcessor(settings, transport, registry=registry)
    client: RequestResponseClient[TextCompletionRequest, TextCompletionResponse] = (
        RequestResponseClient(
            transport, topics["request"], topics["response"], TextCompletionResponse
        )
    )
    await processor.start()
    try:
        await client.start()
        reply = await client.request(TextCompletionRequest(system="", prompt="hi"), timeout=30)
        assert reply.error is None and reply.response
    finally:
        await client.close()
        await processor.stop()
