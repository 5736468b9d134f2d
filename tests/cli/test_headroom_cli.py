"""``scalesched headroom``: its JSON keys, the chart, an oracle row, and bad input as one
line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()
SMALL = ["--workflows", "60", "--load", "0.8", "--seed", "1", "--no-progress"]


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["headroom", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_keys_and_plot(tmp_path: Path) -> None:
    chart = tmp_path / "headroom.png"
    code, out, err = _invoke(
        *SMALL, "--policy", "eft", "--policy", "tail", "--no-oracle", "--json", "--plot", str(chart)
    )
    assert code == 0, err
    assert f"headroom chart written to {chart}" in " ".join(err.split())
    data = json.loads(out)
    for key in ("lower_bound", "capacity_bound", "oracle", "decomposition", "policies"):
        assert key in data
    assert set(data["policies"]) == {"eft", "tail"}
    assert data["oracle"] == {}
    assert data["best_heuristic"] in ("eft", "tail")
    for row in data["policies"].values():
        assert row["mean_s"] >= data["lower_bound"]["mean_s"]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_arrivals_are_a_setting() -> None:
    code, out, err = _invoke(*SMALL, "--policy", "tail", "--no-oracle", "--arrivals", "azure-conv")
    assert code == 0, err
    assert "azure-conv arrivals" in out
    code, out, err = _invoke(*SMALL, "--policy", "tail", "--no-oracle", "--json")
    assert json.loads(out)["setting"]["arrivals"] == "poisson"


def test_table_names_the_columns() -> None:
    code, out, err = _invoke(*SMALL, "--policy", "eft", "--no-oracle")
    assert code == 0, err
    for word in ("contention-free bound", "capacity-aware bound", "admit", "slower"):
        assert word in out


def test_one_tiny_oracle_row() -> None:
    code, out, err = _invoke(
        "--workflows", "20", "--load", "0.5", "--seed", "1", "--no-progress",
        "--policy", "tail", "--oracle", "rollout_oracle", "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    row = data["oracle"]["rollout_oracle"]
    assert row["mean_s"] > 0 and "gain_over_best" in row and "headroom_captured" in row
    assert data["policies"]["rollout_oracle"]["oracle"] is True


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--policy", "nope"], "--policy"),
        (["--oracle", "nope"], "--oracle"),
        (["--cluster", "nope"], "cluster"),
        (["--workload", "nope"], "--workload"),
        (["--load", "-1"], "--load"),
        (["--workflows", "0"], "--workflows"),
        (["--plot", "/no/such/folder/x.png"], "--plot"),
        (["--plot", "chart.notanimage"], "--plot"),
        (["--arrivals", "diurnal"], "--arrivals"),
        (["--kv-policy", "bogus"], "--kv-policy"),
        (["--tool-repeat", "2"], "--tool-repeat"),
        (["--tool-cache", "maybe"], "--tool-cache"),
        (["--bound-time-limit", "0"], "--bound-time-limit"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], names: str) -> None:
    code, _, err = _invoke(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and names in lines[0], err


def test_the_tables_fit_80_columns_with_the_names_whole() -> None:
    policies = ["eft", "fcfs_workflow", "least_loaded"]
    args = [*SMALL, "--no-oracle", *(a for p in policies for a in ("--policy", p))]
    result = runner.invoke(app, ["headroom", *args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    split = lines.index(next(line for line in lines if line.strip().startswith("where each")))
    rows = [
        line.split() for line in lines[split:] if line.split()[:1] and line.split()[0] in policies
    ]
    assert sorted(row[0] for row in rows) == sorted(policies)  # whole names, not 'fcfs…'
    assert all(len(row) == 10 and "…" not in " ".join(row) for row in rows), rows
