"""Research, derivation and benchmark scripts use the installed package's public API only.

They run against ``pip install -e .``: a ``sys.path`` edit would let a script run against a
different tree than the one installed, and a private name (``_something``) is free to change
under them. The check is static (the AST), so it covers every script without running one.
Private members reached through an instance (``obj._x``) are out of its reach; review
catches those.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("research", "scripts", "benchmarks")
PACKAGE = "scalesched"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package_module(module: str | None) -> bool:
    return module is not None and (module == PACKAGE or module.startswith(PACKAGE + "."))


def _root_name(node: ast.expr) -> str | None:
    """``a`` for ``a.b.c``; None when the chain does not start at a plain name."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def violations(source: str) -> list[str]:
    """One line per ``sys.path`` edit or private package name in ``source``."""
    tree = ast.parse(source)
    found: list[str] = []
    bound: set[str] = set()  # names that refer to the package or something imported from it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _package_module(alias.name):
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and _package_module(node.module):
            assert node.module is not None
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
            found.append(f"line {node.lineno}: sys.path")
        elif node.attr == "addsitedir":
            found.append(f"line {node.lineno}: site.addsitedir")
        elif _private(node.attr) and _root_name(node.value) in bound:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _scripts() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (REPO / folder).rglob("*.py"))


def test_there_are_scripts_to_check() -> None:
    assert len(_scripts()) > 20


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: str(p.relative_to(REPO)))
def test_script_uses_the_public_api_only(path: Path) -> None:
    assert violations(path.read_text()) == []


def test_the_check_catches_each_kind() -> None:
    bad = """
import sys
import site
import scalesched.runs.capacity as cap
import scalesched._hidden
from scalesched.sim.run import _drive, SimResult
from scalesched.sim._impl import thing
from scalesched.runs import capacity
sys.path.insert(0, "x")
site.addsitedir("y")
cap._memory.clear()
capacity._shipped_table()
SimResult._fields
scalesched.runs._private
"""
    found = violations(bad)
    assert len(found) == 9, found
    ok = """
import os
from scalesched.sim.run import SimResult
obj = SimResult
print(obj.__doc__, os.path.join("a"), other._x)
"""
    assert violations(ok) == []
