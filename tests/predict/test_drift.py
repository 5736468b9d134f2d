"""Injected slowdown: the simulator feels it, the trained predictor misses it, sliding-window
recalibration recovers its coverage."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.errors import InputError
from scalesched.eval.drift import apply_drift, drift_study, parse_drift
from scalesched.predict import default_predictor
from scalesched.runs.traces import TraceRun

TABLES = ClusterTables(get_cluster("hetero-8"))


@pytest.mark.parametrize(
    "text", ["H100-80G", "H100-80G:2", "V100:2@10", "H100-80G:-1@5", "L4-24G:2@-3"]
)
def test_bad_drift_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="--drift"):
        parse_drift(text, TABLES)


def test_drift_scales_only_that_gpu_type() -> None:
    tables = ClusterTables(get_cluster("hetero-8"))
    before = tables.decode_lin.copy()
    n = apply_drift(tables, parse_drift("L4-24G:3@0", tables))
    hit = [getattr(e, "gpu_type", None) == "L4-24G" for e in tables.engines]
    assert n == sum(hit) > 0
    np.testing.assert_allclose(tables.decode_lin[hit], 3 * before[hit])
    np.testing.assert_array_equal(tables.decode_lin[~np.array(hit)], before[~np.array(hit)])


def test_recalibration_restores_coverage_after_a_slowdown() -> None:
    run = TraceRun(get_cluster("hetero-8"), "agentic-mix", workflows=240, seed=9005)
    report = drift_study(default_predictor(), run, "H100-80G:3@40", window=200)
    assert "routing_adapted" not in report  # soft_eft does not read the predictor
    cov = report["coverage"]["drifted"]  # 240 workflows: "before" is the cold start
    assert cov["before"]["static"]["coverage_90"] > 0.7
    assert cov["during"]["static"]["coverage_90"] < 0.5  # the simulator slowed down
    assert cov["during"]["adaptive"]["coverage_90"] > 0.8


def test_cli_drift_bad_input_is_one_line() -> None:
    from scalesched.cli import app

    r = CliRunner().invoke(app, ["predict", "drift", "--drift", "nope"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "GPU_TYPE:FACTOR@TIME" in r.output


def test_tail_routing_on_recalibrated_durations_avoids_the_slowed_type() -> None:
    """With adaptation, tail learns that the H100s slowed down and sends them fewer calls."""
    run = TraceRun(get_cluster("hetero-8"), "agentic-mix", workflows=120, seed=9005, policy="tail")
    report = drift_study(default_predictor(), run, "H100-80G:3@30", window=100)
    trained, adapted = (
        report["coverage"]["drifted"],
        report["routing_adapted"]["coverage"]["drifted"],
    )
    after = trained["during"]["n"] + trained["after"]["n"]
    assert adapted["during"]["n"] + adapted["after"]["n"] < 0.8 * after
    # the last workflows arrive before the "after" phase begins in so short a run
    assert {"before", "during"} <= set(report["routing_adapted"]["p99_response_s"])
