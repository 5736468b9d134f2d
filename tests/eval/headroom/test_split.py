"""The headroom split on a planned deployment: deployment, placement and ordering over one
window of the same jobs, its parts adding up, its JSON keys, and bad input refused."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.eval.headroom import Headroom, measure_headroom
from scalesched.eval.headroom.split import ORDERING_RULES, Bounds, ordering_specs, paired
from scalesched.runs.setup import Scenario, prepare

runner = CliRunner()
TOL = 1e-9


@pytest.fixture(scope="module")
def study() -> Headroom:
    setup = prepare(
        "hetero-16",
        Scenario(workload="agentic-mix", workflows=150, load=0.9, seed=3, residency="planned"),
        stream=False,
    )
    assert setup.deployment is not None
    return measure_headroom(setup, ["tail", "eft"], [], split=True)


def test_bounds_are_ordered(study: Headroom) -> None:
    b = study.split.bounds if study.split else None
    assert b is not None
    assert b.any_deployment_s <= b.deployment_contention_free_s * (1 + TOL)
    assert b.deployment_contention_free_s <= b.deployment_s
    assert b.any_deployment_s == study.any_deployment_bound_s
    # the bound over allocations is solved here, between the any-deployment bound and
    # this deployment's capacity-aware bound, and the best allocation's bound is it
    assert study.allocation is not None and b.allocation_s == study.allocation.mean_s
    assert b.allocation_s is not None
    assert b.any_deployment_s <= b.best_allocation_s == max(b.any_deployment_s, b.allocation_s)
    assert b.best_allocation_s <= b.deployment_s * (1 + TOL)
    assert all(row.mean_s >= b.best_allocation_s for row in study.rows)


def test_without_a_bound_over_allocations_the_any_deployment_bound_stands() -> None:
    bounds = Bounds(any_deployment_s=3.0, deployment_s=5.0, deployment_contention_free_s=4.0)
    assert bounds.best_allocation_s == 3.0
    below = dataclasses.replace(bounds, allocation_s=2.5)  # a Lagrangian priced far below
    assert below.best_allocation_s == 3.0
    assert dataclasses.replace(bounds, allocation_s=3.5).best_allocation_s == 3.5


def test_parts_add_up(study: Headroom) -> None:
    split = study.split
    assert split is not None
    for row in study.rows:
        assert split.means[row.name] == row.mean_s
        total = split.total_s(row.name)
        assert total == pytest.approx(row.mean_s - split.bounds.best_allocation_s, abs=TOL)
        assert total == pytest.approx(split.deployment_s + split.placement_s(row.name), abs=TOL)
    ladder = split.ladder()
    assert ladder is not None
    parts = ladder["planning_gain_s"] + ladder["deployment_s"] + ladder["placement_s"]
    assert ladder["total_s"] == pytest.approx(parts, abs=TOL)
    assert all(abs(r) < 1e-9 for r in split.residuals())


def test_dynamic_runs_share_the_jobs_and_window(study: Headroom) -> None:
    """The dynamic runs (the best heuristic and tail by default) are on the same workflows:
    the planning gain pairs them one by one, and its mean is the difference of the two
    worlds' means over the window (every workflow finished)."""
    split = study.split
    assert split is not None and split.planning_gain is not None
    assert set(split.dynamic) == {study.best_heuristic, "tail"}
    assert split.dynamic_best is not None
    gain = split.dynamic[split.dynamic_best] - split.means[study.best_heuristic or ""]
    assert split.planning_gain.diff_s == pytest.approx(gain, rel=1e-9)
    assert math.isfinite(split.planning_gain.ci_s)


def test_ordering_rules_run_over_the_best_router(study: Headroom) -> None:
    split = study.split
    assert split is not None
    assert [rule for rule, *_ in split.ordering] == list(ORDERING_RULES)
    for _, change, mean, router_mean in split.ordering:
        assert change.diff_s == pytest.approx(mean - router_mean, abs=1e-9)
        assert change.b in ("tail", "eft")


def test_json_keys(study: Headroom) -> None:
    data = json.loads(json.dumps(study.as_json()))
    assert data["any_deployment_bound"]["mean_s"] == study.any_deployment_bound_s
    split = data["split"]
    assert set(split) == {"bounds", "deployment", "placement", "ordering"}
    assert {"any_deployment_s", "best_allocation_s", "deployment_s"} <= set(split["bounds"])
    dep = split["deployment"]
    parts = dep["configurations_s"] + dep["capacity_s"] - dep["any_allocation_capacity_s"]
    assert parts == pytest.approx(dep["deployment_s"])
    assert data["allocation_bound"]["mean_s"] == split["bounds"]["allocation_s"]
    assert {"planning_gain", "ladder", "dynamic_means_s"} <= set(dep)
    assert set(split["placement"]) == {"tail", "eft"}
    assert set(split["ordering"]) == set(ORDERING_RULES)
    assert data["setting"]["world"] == "planned"


def test_ordering_specs() -> None:
    assert ordering_specs("tail") == ["fcfs_workflow", "plas"]
    assert ordering_specs("eft") == ["fcfs_workflow:placement=eft", "plas:placement=eft"]


def test_paired_refuses_different_windows() -> None:
    with pytest.raises(ValueError, match="different windows"):
        paired("a", "b", {"a": np.ones(3), "b": np.ones(4)})


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--dynamic-policy", "no-such-policy"], "--dynamic-policy"),
        (["--bound-sample", "-1"], "--bound-sample"),
    ],
)
def test_bad_input_is_one_line(args: list[str], named: str) -> None:
    result = runner.invoke(app, ["headroom", "--workflows", "50", "--no-oracle", *args])
    assert result.exit_code == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_on_dynamic_residency_the_rows_are_the_dynamic_runs() -> None:
    """A study already on dynamic residency runs nothing more there: its rows are the
    dynamic runs, and its planning gain is 0 (the best heuristic against itself)."""
    setup = prepare("hetero-16", Scenario(workflows=60, rate=2.0, seed=4), stream=False)
    assert setup.deployment is None
    study = measure_headroom(setup, ["tail", "eft"], [], split=True)
    split = study.split
    assert split is not None and split.planning_gain is not None
    assert split.dynamic == split.means
    assert split.planning_gain.diff_s == 0.0
    assert split.bounds.any_deployment_s <= split.bounds.deployment_contention_free_s
    assert split.bounds.allocation_s is not None
    assert split.bounds.allocation_s <= split.bounds.deployment_s * (1 + TOL)
    assert all(abs(r) < 1e-9 for r in split.residuals())
