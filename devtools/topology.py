"""The stack's queue topology, described once, and the files generated from it.

Each processor is listed with its topics: the spec names it registers and the queue each
is wired to (TrustGraph's ``<class>:tg:<topic>:<workspace>:<flow>`` naming). From this one
description ``python -m devtools.topology --write``, run from the repository root (or given
``--root``), writes the topology parts of

- ``config/flows/stack.yaml`` (below its marker line; the settings above it are by hand),
- ``config/flows/<processor>.yaml`` (one processor's flow; the comment header is kept),
- ``config/trustgraph/flow-blueprint.json`` (the TrustGraph flow blueprint),
- ``helm/react-mem/templates/_flows.tpl`` (the chart's flow file, per enabled processor,
  and its list of the processors that keep vectors in Qdrant),
- the memory services' entries in ``config/groups/stack.yaml`` and ``memory.yaml`` (below
  their marker lines), their service blocks in ``docker-compose.yml`` and their names in
  ``deploy/prometheus/prometheus.yml`` (between marker lines): the other processors'
  entries there carry settings of their own and are kept by hand,
- the processor names ``helm/react-mem/values.schema.json`` accepts, and the memory
  services' values (with their resources) in ``values.yaml`` (between marker lines),
- the memory services the Qdrant-latency alert of ``deploy/prometheus/alerts.yml`` watches,

and ``--check`` fails when a committed file differs (``tests/test_topology.py`` runs it).
A development tool: it edits a checkout, so it is not part of the installed package (the
runtime shares only the queue naming, :func:`react_mem.commands.common.queue`).
The memory services come from their kinds (:mod:`react_mem.processor.kinds`): a new one is
declared in its own package and registered in ``pyproject.toml``, not here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from devtools.splice import alerts, between, header, schema
from react_mem.commands.common import queue
from react_mem.processor.kinds import Deploy, MemoryKind, MemoryKinds

QueueClass = Literal["request", "response", "flow"]
#: The generated files, relative to the repository root (``--root``, the working directory).
FLOWS = Path("config/flows")
BLUEPRINT = Path("config/trustgraph/flow-blueprint.json")
HELM_FLOWS = Path("helm/react-mem/templates/_flows.tpl")
GROUP = Path("config/groups/stack.yaml")
MEMORY_GROUP = Path("config/groups/memory.yaml")
COMPOSE = Path("docker-compose.yml")
PROMETHEUS = Path("deploy/prometheus/prometheus.yml")
SCHEMA = Path("helm/react-mem/values.schema.json")
VALUES = Path("helm/react-mem/values.yaml")
ALERTS = Path("deploy/prometheus/alerts.yml")
MARKER = "  # -- topology: generated from devtools/topology.py (--write); edit that --"
SERVICES_MARKER = (
    "  # -- memory services: generated from devtools/topology.py (--write); edit that --"
)
SERVICES_END = "  # -- end of the generated memory services --"


@dataclass(frozen=True)
class Topic:
    spec: str
    cls: QueueClass
    name: str
    #: Wired only where this processor runs too (helm's enabled processors).
    when: str | None = None
    #: One queue per workspace, shared by its flows (TrustGraph's librarian), not per flow.
    per_workspace: bool = False

    def queue(self, workspace: str, flow: str) -> str:
        if self.per_workspace:
            return f"{self.cls}:tg:{self.name}:{workspace}"
        return queue(self.cls, self.name, workspace, flow)


def serves(service: str, *, next_: bool = False) -> tuple[Topic, ...]:
    """The request and response queues of the service a processor runs."""
    own: tuple[Topic, ...] = (Topic("request", "request", service),)
    if next_:  # the agent's iterations go back onto its own request queue
        own += (Topic("next", "request", service),)
    return (*own, Topic("response", "response", service))


def client(
    service: str,
    queue: str | None = None,
    *,
    optional: bool = False,
    per_workspace: bool = False,
) -> tuple[Topic, ...]:
    """A request/response client of ``service`` (served on queue topic ``queue``); an
    ``optional`` one is wired only where ``service`` runs; a ``per_workspace`` service
    serves all of a workspace's flows on one queue."""
    name, when = queue or service, service if optional else None
    return (
        Topic(f"{service}-request", "request", name, when, per_workspace),
        Topic(f"{service}-response", "response", name, when, per_workspace),
    )


def flow(spec: str, topic: str, *, when: str | None = None) -> Topic:
    """A persistent flow queue (produced or consumed)."""
    return Topic(spec, "flow", topic, when)


@dataclass(frozen=True)
class Node:
    """One processor of the stack."""

    id: str
    topics: tuple[Topic, ...]
    #: Clients only a TrustGraph deployment serves (in the blueprint, not the stack), and
    #: flows only it consumes (placed last).
    trustgraph: tuple[Topic, ...] = ()
    trustgraph_flows: tuple[Topic, ...] = ()
    #: In the TrustGraph blueprint (TrustGraph runs its own text-completion).
    blueprint: bool = True
    #: A memory service: its group entry and compose service are generated from this.
    deploy: Deploy | None = None


AUDIT = flow("audit", "memory-audit")
TRAJECTORY = flow("trajectory", "agent-trajectory")

#: The agent's clients of TrustGraph's services, on the queues agent-manager's blueprint
#: entry gives them (TrustGraph's templates, ``flows/agent.jsonnet``; pinned in
#: tests/test_trustgraph_config.py).
AGENT_TRUSTGRAPH = (
    *client("prompt", "prompt-rag"),
    *client("graph-rag"),
    *client("mcp-tool"),
    *client("structured-query"),
    *client("embeddings"),
    *client("row-embeddings-query", "row-embeddings"),
    *client("librarian", per_workspace=True),
)
#: Provenance goes where TrustGraph's explainability reads it: the flow's triples store.
AGENT_TRUSTGRAPH_FLOWS = (flow("explainability", "triples-store"),)
LEARNER = Node(
    "memory-learner",
    (
        TRAJECTORY,
        flow("conversation-ended", "conversation-ended"),
        AUDIT,
        flow("feedback", "agent-feedback", when="playbook-memory"),
        flow("memory-forget", "memory-forget"),
        Topic("memory-forget-response", "response", "memory-forget"),
        *client("playbook-memory", optional=True),
        *client("text-completion"),
        *client("fact-memory"),
        *client("episode-memory"),
        *client("conversation-memory"),
    ),
)
TEXT_COMPLETION = Node("text-completion", serves("text-completion"), blueprint=False)


def agent(memory: Iterable[MemoryKind]) -> Node:
    """The agent, with an optional client of each memory service it calls."""
    return Node(
        "agent-mem",
        (
            *serves("agent", next_=True),
            *client("text-completion"),
            *(t for k in memory if k.called_by_agent for t in client(k.name, optional=True)),
            flow("trajectory", "agent-trajectory", when="memory-learner"),
        ),
        trustgraph=AGENT_TRUSTGRAPH,
        trustgraph_flows=AGENT_TRUSTGRAPH_FLOWS,
    )


def memory_node(kind: MemoryKind) -> Node:
    """A memory service's processor, from its kind."""
    return Node(
        kind.name,
        (
            *serves(kind.name),
            *((AUDIT,) if kind.audit else ()),
            *(flow(spec, topic) for spec, topic in kind.flows),
            *(t for service in kind.calls for t in client(service)),
        ),
        deploy=kind.deploy,
    )


def nodes(memory: MemoryKinds) -> tuple[Node, ...]:
    """The stack, in the order of ``config/flows/stack.yaml``: the agent, the learner, the
    text completion, then every memory kind."""
    return (agent(memory), LEARNER, TEXT_COMPLETION, *(memory_node(k) for k in memory))


def interfaces(memory: MemoryKinds) -> tuple[str, ...]:
    """What a TrustGraph client may call directly: the agent and the memory services."""
    return ("agent", *(k.name for k in memory if k.interface))


FLOW_INTERFACES = ("agent-feedback", "memory-audit")
BLUEPRINT_HEAD = {
    "description": (
        "react-mem: the memory-augmented ReAct agent (agent-mem, in place of agent-manager) "
        "with fact, episode, conversation, working and playbook memory and the memory learner"
    ),
    "tags": ["agent", "memory", "react-mem"],
    "parameters": {},
}


def node(node_id: str, memory: MemoryKinds) -> Node:
    return next(n for n in nodes(memory) if n.id == node_id)


def topics(n: Node, workspace: str, flow_name: str, *, trustgraph: bool = False) -> dict[str, str]:
    """The processor's spec names mapped to their queues in one flow."""
    chosen: Iterable[Topic] = n.topics
    if trustgraph:  # the agent's TrustGraph clients go after text-completion, as there
        at = next((i for i, t in enumerate(n.topics) if t.spec == "text-completion-response"), -1)
        chosen = (*n.topics[: at + 1], *n.trustgraph, *n.topics[at + 1 :], *n.trustgraph_flows)
    return {t.spec: t.queue(workspace, flow_name) for t in chosen}


def flow_yaml(nodes: Sequence[Node], workspace: str = "default", flow_name: str = "default") -> str:
    """``processor:<id>`` entries in the flow file's shape, nested under the workspace."""
    blocks = []
    for n in nodes:
        lines = [f"  processor:{n.id}:", f"    {flow_name}:", "      topics:"]
        lines += [f"        {k}: {v}" for k, v in topics(n, workspace, flow_name).items()]
        lines.append("      parameters: {}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def blueprint(memory: MemoryKinds) -> dict[str, Any]:
    served: dict[str, dict[str, str]] = {
        name: {
            "request": f"request:tg:{name}:{{workspace}}:{{id}}",
            "response": f"response:tg:{name}:{{workspace}}:{{id}}",
        }
        for name in interfaces(memory)
    }
    served |= {name: {"flow": f"flow:tg:{name}:{{workspace}}:{{id}}"} for name in FLOW_INTERFACES}
    entries = {
        f"{n.id}:{{id}}": {"topics": topics(n, "{workspace}", "{id}", trustgraph=True)}
        for n in nodes(memory)
        if n.blueprint
    }
    return {**BLUEPRINT_HEAD, "interfaces": served, "blueprint": {}, "flow": entries}


HELM_HEAD = """{{/*
The flow file: {workspace: {config-type: {key: value}}}, what `react-mem run --flows` and the
config service's seed read. Each enabled processor gets `processor:<id>` with one entry per
flow, mapping its spec names to queues (TrustGraph's request:tg:<service>:<workspace>:<flow>
naming); the agent's optional clients are wired only to services that run.
Generated from devtools/topology.py (`--write`): edit that, not this file.
*/}}
{{- define "react-mem.flowFile" -}}
{{- $v := .Values -}}
{{- $ws := $v.flows.workspace -}}
{{- $on := dict -}}
{{- range $name, $p := $v.processors }}{{ if $p.enabled }}{{ $_ := set $on $name true }}{{ end }}{{ end -}}
{{- $agentMem := dict -}}
{{- range $k, $val := $v.agentMem }}{{ $_ := set $agentMem $k (toString $val) }}{{ end -}}
{{- $tools := dict -}}
{{- range $k, $val := $v.tools }}{{ $_ := set $tools $k (ternary $val (toJson $val) (kindIs "string" $val)) }}{{ end -}}
{{- $config := dict "agent-mem" $agentMem "tool" $tools -}}
{{- range $flow := $v.flows.names -}}
{{- $s := printf "%s:%s" $ws $flow -}}
{{- $topics := dict -}}
"""  # noqa: E501 (template lines as Helm reads them)
HELM_TAIL = """{{- range $name, $t := $topics -}}
{{- $key := printf "processor:%s" (index $v.processors $name).id -}}
{{- $entries := default (dict) (index $config $key) -}}
{{- $_ := set $entries $flow (dict "topics" $t "parameters" (dict)) -}}
{{- $_ := set $config $key $entries -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict $ws $config) -}}
{{- end -}}
"""

HELM_STORES = """
{{{{/* Processors whose vector store is Qdrant (generated too). */}}}}
{{{{- define "react-mem.storeProcessors" -}}}}
{}
{{{{- end -}}}}
"""


def helm_flows(memory: MemoryKinds) -> str:
    """The chart's flow-file template: each enabled processor's topics per flow."""
    lines = []
    for n in nodes(memory):
        lines += [f'{{{{- if hasKey $on "{n.id}" -}}}}', "{{- $t := dict -}}"]
        for t in n.topics:
            scope = "$ws" if t.per_workspace else "$s"
            queue = f'(printf "{t.cls}:tg:{t.name}:%s" {scope})'
            set_ = f'$_ := set $t "{t.spec}" {queue}'
            if t.when is None:
                lines.append(f"{{{{- {set_} -}}}}")
            else:
                lines.append(f'{{{{- if hasKey $on "{t.when}" }}}}{{{{ {set_} }}}}{{{{ end -}}}}')
        lines += [f'{{{{- $_ := set $topics "{n.id}" $t -}}}}', "{{- end -}}"]
    stores = " ".join(name for name, d in memory_services(memory) if d.qdrant)
    return HELM_HEAD + "\n".join(lines) + "\n" + HELM_TAIL + HELM_STORES.format(stores)


def memory_services(memory: MemoryKinds) -> list[tuple[str, Deploy]]:
    return [(k.name, k.deploy) for k in memory]


def group_entries(memory: MemoryKinds, *, own_flows: bool = False) -> str:
    """The memory services' entries in ``config/groups/stack.yaml``, or with ``own_flows``
    in ``memory.yaml`` (each on its own flow file)."""
    lines = []
    for name, d in memory_services(memory):
        if own_flows:
            flows = f"../flows/{name}.yaml"
            lines += [
                f"  - class: {name}",
                f"    params: {{id: {name}, concurrency: 4, flows: {flows}}}",
            ]
            continue
        lines.append(f"  - class: {name}")
        lines += [f"    # {note}" for note in d.note]
        extra = f", {d.params}" if d.params else ""
        lines.append(f"    params: {{id: {name}, concurrency: {d.concurrency}{extra}}}")
    return "\n".join(lines) + "\n"


def compose_services(memory: MemoryKinds) -> str:
    """The memory services' blocks in ``docker-compose.yml``."""
    blocks = []
    for name, d in memory_services(memory):
        base, env = ("memory-service", "memory-env") if d.qdrant else ("react-mem", "react-mem-env")
        blocks.append(
            f'  {name}:\n    <<: *{base}\n    command: ["run", "{name}"]\n'
            f"    environment:\n      <<: *{env}\n"
            "      REACT_MEM_CONCURRENCY: ${MEMORY_CONCURRENCY:-4}\n"
        )
    return "\n".join(blocks)


def values_entries(memory: MemoryKinds) -> str:
    """The memory services' entries under ``processors:`` in the chart's ``values.yaml``."""
    blocks = []
    for name, d in memory_services(memory):
        r = d.resources
        blocks.append(
            f"  {name}:\n    enabled: true\n    id: {name}\n    replicas: 1\n"
            f"    concurrency: {d.concurrency}\n    settings: {{}}\n    extraEnv: []\n"
            f"    resources:\n      requests: {{cpu: {r.cpu}, memory: {r.memory}}}\n"
            f"      limits: {{memory: {r.memory_limit}}}\n"
        )
    return "\n".join(blocks)


def generated(root: Path, memory: MemoryKinds) -> dict[Path, str]:
    """Every generated file (relative to the repository ``root``) and its content, for the
    memory kinds ``memory``."""
    stack = FLOWS / "stack.yaml"
    files = {
        stack: header(root / stack, MARKER) + flow_yaml(nodes(memory)),
        BLUEPRINT: json.dumps(blueprint(memory), indent=2, ensure_ascii=False) + "\n",
        HELM_FLOWS: helm_flows(memory),
        GROUP: header(root / GROUP, SERVICES_MARKER) + group_entries(memory),
        MEMORY_GROUP: header(root / MEMORY_GROUP, SERVICES_MARKER)
        + group_entries(memory, own_flows=True),
        COMPOSE: between(root / COMPOSE, SERVICES_MARKER, SERVICES_END, compose_services(memory)),
        SCHEMA: schema(root / SCHEMA, [n.id for n in nodes(memory)] + ["config-service"]),
        VALUES: between(root / VALUES, SERVICES_MARKER, SERVICES_END, values_entries(memory)),
        ALERTS: alerts(root / ALERTS, [name for name, d in memory_services(memory) if d.qdrant]),
        PROMETHEUS: between(
            root / PROMETHEUS,
            "          " + SERVICES_MARKER.lstrip(),
            "          " + SERVICES_END.lstrip(),
            "".join(f"          - {name}\n" for name, _ in memory_services(memory)),
        ),
    }
    for n in nodes(memory):
        path = FLOWS / f"{n.id}.yaml"
        if (root / path).exists():
            files[path] = header(root / path, None) + "default:\n" + flow_yaml([n])
        elif n.deploy is not None:  # config/groups/memory.yaml runs it on this file
            head = f"# The {n.id} processor's flow in the default workspace.\n"
            files[path] = head + "default:\n" + flow_yaml([n])
    return files


def repository(root: Path) -> Path:
    """``root`` if it is this repository's checkout (the files are written there)."""
    project = root / "pyproject.toml"
    if not project.is_file() or 'name = "react-mem"' not in project.read_text("utf-8"):
        raise SystemExit(f"{root} is not the react-mem repository: run from its root or --root")
    return root


def main(argv: Sequence[str] | None = None, memory: MemoryKinds | None = None) -> int:
    """``memory``: the memory kinds (by default the installed packages')."""
    parser = argparse.ArgumentParser(
        prog="python -m devtools.topology", description="Generate the queue topology files."
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the generated files")
    mode.add_argument("--check", action="store_true", help="fail when a file differs")
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="the repository (default: here)"
    )
    args = parser.parse_args(argv)
    root = repository(args.root)
    files = generated(root, MemoryKinds.from_entry_points() if memory is None else memory)
    stale = [
        p for p, text in files.items()
        if not (root / p).exists() or (root / p).read_text("utf-8") != text
    ]  # fmt: skip
    for path in stale:
        if args.write:
            (root / path).write_text(files[path], encoding="utf-8")
        print(f"{'wrote' if args.write else 'differs'}: {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
