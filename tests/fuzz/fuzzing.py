"""The fuzz suite's contract and mutation strategies.

Every invocation must end with exit code 0 or 2; exit 2 with exactly one line on stderr
(no traceback); exit 0 with ``--json`` output free of NaN and Infinity; and within a time
bound. Commands run in-process (``CliRunner``) for speed.

Profiles (``SCALESCHED_FUZZ_PROFILE``): ``ci`` (the default, a few hundred examples in
all, well under a minute) and ``long`` (a thousand examples per test, for a soak run):

    SCALESCHED_FUZZ_PROFILE=long python -m pytest tests/fuzz -q
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scalesched.cli import app

ROOT = Path(__file__).parents[2]
TIME_BOUND_S = 30.0
"""No single command may take longer (the hostile inputs include sizes that used to hang)."""

EXAMPLE_DEADLINE_MS = 2 * TIME_BOUND_S * 1000
"""Hypothesis's own bound on one example (a test may run two commands per example)."""
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=EXAMPLE_DEADLINE_MS,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=EXAMPLE_DEADLINE_MS,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("SCALESCHED_FUZZ_PROFILE", "ci")


def fuzz_settings(share: float = 1.0) -> settings:
    """The selected profile, with ``share`` of its examples (tests differ in cost)."""
    base = settings.get_profile(PROFILE)
    return settings(base, max_examples=max(1, int(base.max_examples * share)))


_runner = CliRunner()


def _no_constants(name: str) -> Any:
    raise AssertionError(f"--json printed {name}")


def check_cli(*args: str) -> tuple[int, str]:
    """Run the CLI and assert the contract; returns (exit code, stdout)."""
    start = time.perf_counter()
    result = _runner.invoke(app, list(args))
    elapsed = time.perf_counter() - start
    assert elapsed < TIME_BOUND_S, f"{elapsed:.1f} s: {args}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"uncaught {type(result.exception).__name__}: {args}") from (
            result.exception
        )
    code = result.exit_code
    assert code in (0, 2), (code, args, result.stderr[-2000:])
    if code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (args, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
    elif "--json" in args:
        json.loads(result.stdout, parse_constant=_no_constants)
    return code, result.stdout


# -- values a mutation puts into a file -----------------------------------------------

HOSTILE_NUMBERS = st.sampled_from(
    [0, -1, 1, 2**31, 2**63, 2**64, 10**9, 10**18, 10**308, -(10**400), 1e308, -1e308]
    + [1e-308, 5e-324, 1e17, 1e9, 0.5, -0.0, float("nan"), float("inf"), float("-inf")]
)
HOSTILE = st.one_of(
    HOSTILE_NUMBERS,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["", "llama-2-70b", "phi-2", "uniform", "lognormal", "fanout", "loop"]),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.sampled_from(["dist", "lo", "hi", "median", "sigma"]), HOSTILE_NUMBERS),
)


@st.composite
def mutated_tree(draw: st.DrawFn, doc: Any, max_mutations: int = 3) -> Any:
    """``doc`` with a few values replaced, keys deleted or values nested deeply."""
    out = copy.deepcopy(doc)
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        parent: Any = None
        key: Any = None
        node = out
        while isinstance(node, dict | list) and node and draw(st.integers(0, 5)) > 0:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            parent, key = node, draw(st.sampled_from(keys))
            node = node[key]
        if parent is None:
            continue
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "nest"]))
        if action == "delete":
            del parent[key]
        elif action == "nest":
            depth = draw(st.sampled_from([2, 50, 5_000, 200_000]))
            parent[key] = f"{DEEP}{depth}"  # spliced in as text: see deep_text
        else:
            parent[key] = draw(HOSTILE)
    return out


DEEP = "__deep_nesting__"


def deep_text(text: str, quote: str = '"') -> str:
    """Replace each ``DEEP<n>`` marker by ``n`` nested arrays (as text: Python's own
    recursion limit would stop building them as objects)."""
    import re

    return re.sub(
        rf"{quote}{DEEP}(\d+){quote}",
        lambda m: "[" * int(m.group(1)) + "1" + "]" * int(m.group(1)),
        text,
    )


def dump_json(doc: Any) -> str:
    """JSON text, NaN/Infinity literals kept, deep-nesting markers spliced in."""
    return deep_text(json.dumps(doc, allow_nan=True))


def dump_yaml(doc: Any) -> str:
    import yaml

    return deep_text(yaml.safe_dump(doc, sort_keys=False), quote="")


@st.composite
def corrupted_text(draw: st.DrawFn, text: str) -> bytes:
    """Text-level damage: truncation, stray bytes, another encoding, or none."""
    kind = draw(st.sampled_from(["none", "none", "truncate", "bytes", "utf16", "bom"]))
    data = text.encode("utf-8")
    if kind == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if kind == "utf16":
        return text.encode("utf-16")
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    return data


def write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


Check = Callable[..., tuple[int, str]]
