"""``scalesched --core``: the simulator's core for a whole command, the same results."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.sim.core import CORE_ENV, compiled_available

runner = CliRunner()
RUN = ("simulate", "--cluster", "hetero-8", "--residency", "dynamic", "--rate", "1")
RUN += ("--workflows", "60", "--policy", "tail", "--json", "--no-progress")


def _metrics(core: str) -> dict[str, object]:
    result = runner.invoke(app, ["--core", core, *RUN])
    assert result.exit_code == 0, result.stderr
    assert os.environ[CORE_ENV] == core  # what worker processes inherit
    return {k: v for k, v in json.loads(result.stdout).items() if "wall" not in k}


def test_a_bad_core_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CORE_ENV, raising=False)
    result = runner.invoke(app, ["--core", "fast", *RUN])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --core: must be python or compiled, got 'fast'"
    ]
    assert CORE_ENV not in os.environ


@pytest.mark.skipif(not compiled_available(), reason="this install has no compiled core")
def test_both_cores_give_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORE_ENV, "python")  # restored after the test
    assert _metrics("compiled") == _metrics("python")
