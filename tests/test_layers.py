"""Dependencies run one way: framework and contracts at the bottom, the services beside each
other on top of it, the command line above them. Every import statement (lazy ones and
``TYPE_CHECKING`` ones included) is read from the source, so a crossed layer fails here."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("react_mem", "memory_services")

#: The bottom layer: the bus, the processor framework, every wire contract (memory services'
#: included), errors, metrics and the components any service may share.
FRAMEWORK = {
    "react_mem",  # the package's own __init__
    "react_mem.bus",
    "react_mem.processor",
    "react_mem.schema",
    "react_mem.errors",
    "react_mem.metrics",
    "react_mem.ownership",
    "react_mem.embedding",
    "react_mem.tokens",
    "react_mem.text",
    "react_mem.retention",
    "react_mem.disk",  # a floor of free space under what a part writes
}
#: The typed clients of the services, the layer just above the framework: they import only
#: the framework, and every service and the command line may use them.
CLIENTS = {"react_mem.clients"}
#: Memory plumbing every memory service may use (the store, the service base, screening).
MEMORY_PLUMBING = {
    "memory_services",
    "memory_services.store",
    "memory_services.processor",
    "memory_services.runtime",
    "memory_services.pii",
    "memory_services.dedup_guard",
    "memory_services.metrics",
    "memory_services.retry",
    "memory_services.scope_registry",
    "memory_services.forget",
    "memory_services.consolidation",
    "memory_services.retrieval",  # dense/lexical/hybrid ranking options, resolved per request
    "memory_services.when",  # time expressions a search may boost
    "memory_services.partition",  # which owners a partitioned replica serves
    "memory_services.backfill",  # a field older records lack, filled by a maintenance pass
    "memory_services.disk",  # writes refused while the store's disk is nearly full
    "memory_services.heap",  # free heap given back to the system after a sweep or a forget
}
#: The command line and the wiring that starts processors: may use any service of react_mem.
TOP = {
    "react_mem.cli",
    "react_mem.commands",
    "react_mem.stack",
    "react_mem.demo",
    "react_mem.inspector",  # a client like the CLI: the typed clients over the bus
}
#: The agent's plugin seam: what a memory kind's ``source`` module (the one module of its
#: package the agent loads, by name, never by import) may use of the agent.
AGENT_SEAM = ("react_mem.agent.sources", "react_mem.agent.items", "react_mem.agent.config")


def plugs_into_the_agent(module: str, name: str) -> bool:
    """``memory_services.<kind>.source`` importing the agent's plugin seam."""
    parts = module.split(".")
    seam = any(name == s or name.startswith(s + ".") for s in AGENT_SEAM)
    return len(parts) == 3 and parts[0] == "memory_services" and parts[2] == "source" and seam


def unit(module: str) -> str:
    """The layer unit a module belongs to: ``react_mem.agent.prompt`` -> ``react_mem.agent``."""
    parts = module.split(".")
    return ".".join(parts[:2])


def modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            name = ".".join(relative.parts)
            yield name.removesuffix(".__init__"), path


def imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # ``from react_mem import agent`` imports a unit too
                yield node.lineno, f"{node.module}.{alias.name}"


def allowed(importer: str, imported: str) -> bool:
    """May a module of unit ``importer`` import something of unit ``imported``?"""
    if importer == imported or imported in FRAMEWORK:
        return True
    if importer in FRAMEWORK or importer in CLIENTS:
        return False  # the framework never reaches up, nor do the clients
    if imported in CLIENTS:
        return True
    if imported.startswith("memory_services"):
        # Memory services use their plumbing; nothing in react_mem imports memory_services
        # (processors are found through the entry-point registry).
        return importer.startswith("memory_services") and imported in MEMORY_PLUMBING
    return importer in TOP  # services do not import each other


@functools.cache
def known_units() -> frozenset[str]:
    return frozenset(unit(m) for m, _ in modules())


def unit_of_import(name: str) -> str | None:
    if not name.startswith(PACKAGES):
        return None
    unit_name = unit(name)
    known = known_units()
    return unit_name if unit_name in known else unit(name.rsplit(".", 1)[0])


def crossings() -> list[str]:
    found = []
    for module, path in modules():
        importer = unit(module)
        for line, name in imports(path):
            imported = unit_of_import(name)
            if plugs_into_the_agent(module, name):
                continue
            if imported is not None and not allowed(importer, imported):
                found.append(f"{path.relative_to(ROOT)}:{line}: {importer} imports {name}")
    return sorted(set(found))


def test_no_import_crosses_a_layer() -> None:
    assert crossings() == []


#: ``"package.module:attribute"``: a name loaded at run time, an import no layer check sees.
STRING_IMPORT = re.compile(r"^(?:react_mem|memory_services)(?:\.\w+)+:\w+$")


def string_imports() -> list[str]:
    """String constants naming an object of the packages by module (entry points live in
    ``pyproject.toml``, not in code): every edge between modules is an import statement."""
    found = []
    for _, path in modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and STRING_IMPORT.match(text):
                found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}: {text}")
    return found


def test_no_module_names_another_by_a_string() -> None:
    assert string_imports() == []
    assert STRING_IMPORT.match("react_mem.agent.sources:FACTS")  # what it would catch
    assert not STRING_IMPORT.match("request:tg:fact-memory:ws:default")


@pytest.mark.parametrize(
    ("importer", "imported", "ok"),
    [
        ("react_mem.agent", "react_mem.schema", True),
        ("react_mem.agent", "memory_services.facts", False),
        ("react_mem.agent", "react_mem.learner", False),
        ("react_mem.schema", "react_mem.agent", False),
        ("react_mem.bus", "react_mem.commands", False),
        ("memory_services.facts", "memory_services.store", True),
        ("memory_services.facts", "memory_services.episodes", False),
        ("memory_services.store", "react_mem.agent", False),
        ("react_mem.commands", "react_mem.agent", True),
        ("react_mem.commands", "memory_services.facts", False),
    ],
)
def test_the_rule_itself(importer: str, imported: str, ok: bool) -> None:
    """The checker can fail: each kind of crossing is refused, each allowed edge passes."""
    assert allowed(importer, imported) is ok


@pytest.mark.parametrize(
    ("module", "name", "ok"),
    [
        ("memory_services.notes.source", "react_mem.agent.sources", True),
        ("memory_services.notes.source", "react_mem.agent.items.Item", True),
        ("memory_services.notes.source", "react_mem.agent.service", False),
        ("memory_services.notes.service", "react_mem.agent.sources", False),
        ("memory_services.notes.deep.source", "react_mem.agent.sources", False),
    ],
)
def test_only_a_kinds_source_module_plugs_into_the_agent(module: str, name: str, ok: bool) -> None:
    assert plugs_into_the_agent(module, name) is ok
