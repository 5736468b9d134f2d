"""What a new user meets first: marked figures off steady state, a train command that
asks before hours of work, honest Ray-run fields, a labelled static ratio (plain --help is
test_help.py's)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched import cli
from scalesched.cli import app
from scalesched.commands.common import metrics_table
from scalesched.kernel.metrics import whole_run_window
from scalesched.policies import BEST_HEURISTIC_CANDIDATES

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_simulate_table_marks_figures_off_steady_state() -> None:
    code, out, err = invoke("simulate", "--cluster", "hetero-4", "--workflows", "20")
    assert code == 0, err
    assert "NOT AT STEADY STATE" in out
    for metric in ("avg_response_time_s", "lower_bound_ratio", "any_deployment_bound_ratio"):
        row = next(line for line in out.splitlines() if metric in line)
        assert "(not steady)" in row, metric
    assert "(not steady)" not in next(line for line in out.splitlines() if "model_loads" in line)
    assert "measured workflows (need 40+)" in " ".join(err.split())


def test_a_steady_run_is_not_marked() -> None:
    table = metrics_table("t", {"avg_response_time_s": 30.0, "steady_state": True})
    assert table.caption is None
    assert list(table.columns[1].cells) == ["30", "True"]


def test_train_without_a_config_says_what_it_would_do_and_asks() -> None:
    code, out, err = invoke("train", "--out", "runs/never")
    assert code == 2 and out == ""
    text = " ".join(err.split())
    assert "600,000 environment steps" in text and "full training budget" in text
    assert "give --config FILE or --preset NAME" in text and "scale-steady-prior-n16" in text
    assert not Path("runs/never").exists()


def test_train_presets_resolve_to_the_shipped_configs(tmp_path: Path) -> None:
    assert "scale-steady-prior-n16" in cli.train_presets()
    path = cli._training_config(None, "scale-steady-prior-n16", tmp_path)
    assert path.is_file()
    # installed with the package (not only in a checkout), and configs/train is that folder
    package = Path(cli.__file__).resolve().parent
    assert path.resolve().is_relative_to(package)
    assert (ROOT / "configs" / "train").resolve() == cli.TRAIN_PRESETS.resolve()
    code, _, err = invoke("train", "--preset", "nope")
    assert code == 2 and "unknown preset 'nope'" in err
    code, _, err = invoke("train", "--preset", "scale-n16", "--config", "x.yaml")
    assert code == 2 and "not both" in err


def test_a_ray_run_s_load_figures_come_from_its_arrivals() -> None:
    arrivals = [0.0, 1.0, 2.0, 3.0, 4.0]
    rts = np.array([2.0, 2.0, 2.0, 2.0, 4.0])
    window = whole_run_window(arrivals, rts)
    assert window["offered_rate_wps"] == pytest.approx(1.0)  # 4 gaps over 4 s
    # time inside the window 0..4 s: 2 + 2 + 2 + 1 + 0 workflow-seconds, over 4 s
    assert window["mean_in_system"] == pytest.approx(7.0 / 4.0)
    assert window["steady_state"] is False  # 5 workflows cannot show a steady state
    failed = whole_run_window(arrivals, np.array([2.0, math.nan, 2.0, 2.0, 2.0]))
    assert failed["mean_in_system"] == pytest.approx(5.0 / 4.0)


def test_a_ray_run_s_figures_match_the_simulator_s_definitions() -> None:
    from scalesched.runs.setup import Scenario, prepare, run

    setup = prepare("hetero-4", Scenario(workload="agentic-mix", workflows=60, seed=0))
    result = run(setup, "eft", warmup=0, cooldown=0)
    window = whole_run_window([j.arrival for j in setup.jobs], result.response_times)
    for key in ("offered_rate_wps", "mean_in_system", "response_trend", "steady_state"):
        assert window[key] == pytest.approx(result.metrics[key], rel=1e-9), key


def test_static_line_labels_the_ratio() -> None:
    code, out, err = invoke(
        "static",
        "--workflow",
        str(ROOT / "configs" / "workflows" / "wfcommons-blast-small.json"),
        "--network",
        str(ROOT / "configs" / "networks" / "example-4.yaml"),
    )
    assert code == 0, err
    assert "ratio to the critical-path lower bound" in out and "total work alone takes" in out


def test_demo_compares_against_every_candidate() -> None:
    policies = cli.demo_policies()
    assert policies[: len(cli.DEMO_LEARNED)] == cli.DEMO_LEARNED
    assert policies[len(cli.DEMO_LEARNED) :] == BEST_HEURISTIC_CANDIDATES


def test_eval_by_default_runs_every_candidate() -> None:
    default = cli.DEFAULT_EVAL_POLICIES.split(",")
    assert default[-len(BEST_HEURISTIC_CANDIDATES) :] == list(BEST_HEURISTIC_CANDIDATES)
