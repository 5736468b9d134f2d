"""``scalesched static``: makespan, JSON, Gantt chart, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
NETWORK = str(ROOT / "configs" / "networks" / "example-4.yaml")
BLAST = str(ROOT / "configs" / "workflows" / "wfcommons-blast-small.json")


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["static", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("policy", ["heft", "cpop", "eft"])
def test_static_prints_the_makespan(policy: str) -> None:
    code, out, err = run(
        "--workflow", "wfcommons:srasearch:24", "--network", NETWORK, "--policy", policy
    )
    assert code == 0, err
    assert out.startswith(f"{policy}: makespan ") and "on 4 nodes" in out and "ratio" in out


def test_static_json_and_gantt(tmp_path: Path) -> None:
    png = tmp_path / "g.png"
    code, out, err = run(
        "--workflow", BLAST, "--network", NETWORK, "--policy", "eft", "--gantt", str(png), "--json"
    )
    assert code == 0, err
    row = json.loads(out)
    assert row["tasks"] == 6 and row["nodes"] == 4
    assert row["makespan_s"] >= row["lower_bound_s"] > 0
    assert row["bandwidth_exact"] is True  # the example's links factor as min(a, b)
    assert row["sim_makespan"] > 0
    assert png.stat().st_size > 0


def test_static_heft_matches_the_library() -> None:
    from scalesched.static import heft, load_network, load_task_graph

    code, out, _ = run("--workflow", BLAST, "--network", NETWORK, "--json")
    assert code == 0
    expected = heft(load_task_graph(BLAST), load_network(NETWORK)).makespan
    assert json.loads(out)["makespan_s"] == expected


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--workflow", "wfcommons:montage:10", "--network", NETWORK],
            "--workflow: tasks: recipe 'montage' needs TASKS >= 60",
        ),
        (["--workflow", "wfcommons:nope:100", "--network", NETWORK], "unknown WfCommons recipe"),
        (["--workflow", BLAST, "--network", "missing.yaml"], "missing.yaml: file: no such file"),
        (["--workflow", "react", "--network", NETWORK], "expected a WfFormat .json file"),
        (
            [
                "--workflow",
                str(ROOT / "configs" / "workflows" / "support-agent.json"),
                "--network",
                NETWORK,
            ],
            "CPU tool tasks only",
        ),
        (["--workflow", BLAST, "--network", NETWORK, "--policy", "nope"], "unknown policy"),
    ],
)
def test_static_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    code, out, err = run(*args)
    assert code == 2, out
    assert needle in err and len(err.strip().splitlines()) == 1
