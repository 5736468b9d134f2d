"""Data flows one way: the simulator imports no policy, network, runtime or evaluation
module (not even lazily, inside a function); the runtime does not import the simulator's
engine; the decision contract imports none of the layers that use it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import scalesched

PACKAGE = Path(scalesched.__file__).parent


def imported_modules(package: str) -> dict[str, set[str]]:
    """Every ``scalesched.*`` module each file of ``package`` imports, at any depth."""
    found: dict[str, set[str]] = {}
    for path in sorted((PACKAGE / package).glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        found[path.name] = {n for n in names if n.startswith("scalesched.")}
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("sim", ("policies", "nn", "runtime", "eval", "env", "train")),
        ("decision", ("kernel", "sim", "env", "runtime", "policies", "nn", "eval", "train")),
        ("runtime", ("sim.engine", "policies", "nn", "eval", "train")),
    ],
)
def test_layers_import_only_downwards(package: str, forbidden: tuple[str, ...]) -> None:
    bad = {
        (file, name)
        for file, names in imported_modules(package).items()
        for name in names
        for layer in forbidden
        if name == f"scalesched.{layer}" or name.startswith(f"scalesched.{layer}.")
    }
    assert not bad, f"{package}/ reaches upward: {sorted(bad)}"


def test_the_scan_sees_imports() -> None:
    assert "scalesched.decision.features" in imported_modules("sim")["engine.py"]


def test_one_llm_engine_model_serves_the_simulator_and_the_runtime() -> None:
    """Both executors read the batch arithmetic (admission, step times, eviction) from the
    neutral module, and that module needs nothing above the contract and the cluster."""
    model = "scalesched.kernel.llm_engine"
    assert model in imported_modules("sim")["gpu_engine.py"]
    assert model in imported_modules("runtime")["agent.py"]
    allowed = ("scalesched.decision.features", "scalesched.cluster")
    own = imported_modules("kernel")["llm_engine.py"]
    assert all(name.startswith(allowed) for name in own), sorted(own)
