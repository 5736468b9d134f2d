"""The package's layers point one way (docs/architecture.md), checked on the source.

Every ``scalesched`` import counts: at module level, inside functions and under
``TYPE_CHECKING``. A module may import its own layer or any layer below; packages of one
layer may import each other, but no import cycle may form, between modules or between
packages. The one exception to the cycle rule: a part of a composed object may name the
whole it belongs to under ``TYPE_CHECKING`` (type hints only, never run), as
``sim.kv_reuse`` names ``sim.engine.Simulation``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx
import pytest

import scalesched

PACKAGE = Path(scalesched.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "stats", "workload", "cluster"),  # specs: plain data and plain statistics
    ("decision",),  # the contract
    ("kernel", "sim", "runtime", "cache", "serve"),  # executors
    ("predict", "nn", "policies", "static"),  # policies
    ("runs", "plan"),  # setting up runs: setup, windows, capacity, worlds, planned deployments
    ("env", "train"),  # learning: episodes and validation are runs
    ("eval", "memplan"),  # studies and reports
    ("cli", "commands", "options", "__main__"),  # the command line
)
LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}

ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset()
"""(importer, imported) pairs that break the rule, each with the reason."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_only_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


@functools.cache
def import_graph(*, runtime_only: bool = False) -> dict[str, set[str]]:
    """Module -> the scalesched modules it imports (the deepest that exists). With
    ``runtime_only``, imports under ``TYPE_CHECKING`` (a part naming the whole it belongs
    to, for its type hints) are left out."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_only_nodes(tree) if runtime_only else set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    found.add(full if full in paths else target)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {t for t in found if t in paths and t != name}
    return graph


def top_package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer() -> None:
    unplaced = {top_package(m) for m in import_graph()} - set(LAYER_OF) - {""}
    assert not unplaced, f"give these packages a layer in LAYERS: {sorted(unplaced)}"


def test_no_module_imports_upward() -> None:
    upward = sorted(
        (importer, imported)
        for importer, targets in import_graph().items()
        for imported in targets
        if top_package(importer)
        and top_package(imported)
        and LAYER_OF[top_package(imported)] > LAYER_OF[top_package(importer)]
        and (importer, imported) not in ALLOWED_UPWARD
    )
    assert not upward, "imports pointing up a layer:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in upward
    )


def test_no_import_cycle_between_modules() -> None:
    edges = import_graph(runtime_only=True).items()
    graph = nx.DiGraph([(a, b) for a, ts in edges for b in ts if (a, b) not in ALLOWED_UPWARD])
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_no_import_cycle_between_packages() -> None:
    graph = nx.DiGraph()
    for importer, targets in import_graph().items():
        for imported in targets - {b for a, b in ALLOWED_UPWARD if a == importer}:
            a, b = top_package(importer), top_package(imported)
            if a and b and a != b:
                graph.add_edge(a, b)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"package cycles: {cycles}"


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("sim", ("torch", "ray")), ("policies", ("torch", "ray")), ("decision", ("torch", "ray"))],
)
def test_the_simulator_and_heuristics_never_import_torch_or_ray(
    package: str, forbidden: tuple[str, ...]
) -> None:
    bad = []
    for path in (PACKAGE / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            bad += [(path.name, n) for n in names if n.split(".")[0] in forbidden]
    assert not bad, bad


def test_the_scan_sees_imports_inside_functions() -> None:
    """A guard on the guard: ``load_trained`` imports the network lazily, inside a function."""
    assert "scalesched.nn.scheduler" in import_graph()["scalesched.policies.trained"]
