"""Size rule of the code base: no function over 80 lines, no class over 30 methods.

Long functions are split into named steps a reader follows in one pass. The few that are
still over the limit are listed in ``ALLOWED`` with their size today and the reason they
remain; an entry may not grow, and must be removed once its function or class is split
(the test says so), so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scalesched"

MAX_FUNCTION_LINES = 80
MAX_CLASS_METHODS = 30


class Allowed(NamedTuple):
    size: int
    """Lines (functions) or methods (classes) today: the entry may not grow past it."""
    reason: str


ALLOWED: dict[str, Allowed] = {}


class Measured(NamedTuple):
    key: str
    """``path/inside/scalesched.py::Qualified.name``"""
    kind: str
    size: int


def _measure(path: Path, root: Path = SRC) -> list[Measured]:
    """Every function's line count and every class's method count in one module."""
    rel = path.relative_to(root).as_posix()
    found: list[Measured] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                assert child.end_lineno is not None
                lines = child.end_lineno - child.lineno + 1
                found.append(Measured(f"{rel}::{name}", "function", lines))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                name = prefix + child.name
                methods = sum(
                    isinstance(x, ast.FunctionDef | ast.AsyncFunctionDef) for x in child.body
                )
                found.append(Measured(f"{rel}::{name}", "class", methods))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")
    return found


def _limit(kind: str) -> int:
    return MAX_FUNCTION_LINES if kind == "function" else MAX_CLASS_METHODS


def _all_measured() -> list[Measured]:
    return [m for p in sorted(SRC.rglob("*.py")) for m in _measure(p)]


def test_no_function_or_class_over_the_limit() -> None:
    over = [m for m in _all_measured() if m.size > _limit(m.kind) and m.key not in ALLOWED]
    assert not over, "\n".join(
        f"{m.key}: {m.size} {'lines' if m.kind == 'function' else 'methods'} "
        f"(limit {_limit(m.kind)}): split it into named steps"
        for m in over
    )


def test_the_allow_list_only_shrinks() -> None:
    measured = {m.key: m for m in _all_measured()}
    problems = []
    for key, allowed in ALLOWED.items():
        m = measured.get(key)
        if m is None:
            problems.append(f"{key}: no longer exists; remove it from ALLOWED")
        elif m.size <= _limit(m.kind):
            problems.append(f"{key}: now {m.size}, within the limit; remove it from ALLOWED")
        elif m.size > allowed.size:
            problems.append(f"{key}: grew from {allowed.size} to {m.size}; split it instead")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 80, [("m.py::f", "function", 81)]),
        (
            "class C:\n    def a(self):\n        def inner():\n            pass\n",
            [
                ("m.py::C", "class", 1),
                ("m.py::C.a", "function", 3),
                ("m.py::C.a.inner", "function", 2),
            ],
        ),
    ],
)
def test_the_measure_counts_lines_and_methods(
    tmp_path: Path, source: str, expected: list[tuple[str, str, int]]
) -> None:
    """The walk counts a function's lines from ``def`` to its last line, a class's own
    methods, and names nested definitions by their path."""
    (tmp_path / "m.py").write_text(source)
    assert [tuple(m) for m in _measure(tmp_path / "m.py", tmp_path)] == expected
