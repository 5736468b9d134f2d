"""``simulate --workflows auto`` and the default policy."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()


def test_simulate_auto_grows_to_the_cap_and_reports_what_it_did() -> None:
    """No --workflows is --workflows auto: a default run is as long as its precision needs
    (1500 workflows on a planned hetero-16 at load 0.7 span 100 s, under 4 responses)."""
    res = runner.invoke(
        app,
        ["simulate", "--cluster", "hetero-4", "--precision", "0.5",
         "--max-workflows", "300", "--json", "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    m = json.loads(res.stdout)
    assert m["workflows_auto"] == "300" and m["workflows_submitted"] == 300
    assert m["policy"] == "tail"  # the default choice
    assert m["precision_reached"] == (
        m["steady_state"] and m["avg_response_time_ci_s"] <= 0.5 * m["avg_response_time_s"]
    )
    assert "auto: 300 workflows:" in res.stderr


def test_auto_refuses_arrivals_with_no_steady_state_in_one_line() -> None:
    res = runner.invoke(
        app,
        ["simulate", "--cluster", "hetero-4", "--workflows", "auto", "--arrivals", "azure-conv"],
    )
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no run length reaches a steady state" in lines[0]
