"""Measured capacity: what --load 1.0 means."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.eval import capacity as cap
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.run import simulate

SPEC = get_cluster("hetero-4")
WORKLOAD = "react"


@pytest.fixture(scope="module")
def measured() -> cap.CapacityResult:
    return cap.measure_capacity(SPEC, WORKLOAD, policies=("eft", "least_loaded"))


def test_capacity_is_the_best_policys_saturated_throughput(
    measured: cap.CapacityResult,
) -> None:
    assert measured.capacity_wps == max(measured.per_policy_wps.values())
    assert measured.best_policy in ("eft", "least_loaded")
    for policy, rate in measured.per_policy_wps.items():
        probes = [p for p in measured.probes if p["policy"] == policy]
        assert len(probes) == cap.FIXED_POINT_STEPS

        def estimate_after(probe: dict[str, float]) -> float:
            kept_up = probe["throughput_wps"] >= cap.KEPT_UP * probe["rate_wps"]
            return probe["rate_wps"] if kept_up else probe["throughput_wps"]

        for before, after in zip(probes, probes[1:], strict=False):
            assert after["rate_wps"] == pytest.approx(cap.OVERLOAD * estimate_after(before))
        assert rate == pytest.approx(estimate_after(probes[-1]))
        # Settled: the last two estimates agree.
        assert estimate_after(probes[-1]) == pytest.approx(estimate_after(probes[-2]), rel=0.06)


def test_below_capacity_keeps_up_far_above_does_not(measured: cap.CapacityResult) -> None:
    tables = ClusterTables(SPEC)
    n = cap.workflows_for(len(SPEC))

    def steady(rate: float) -> bool:
        jobs = build_jobs(tables, Scenario(workload=WORKLOAD, workflows=n, rate=rate, seed=77))
        m = simulate(
            SPEC,
            jobs,
            get_policy(measured.best_policy),
            tables=tables,
            warmup=cap.default_warmup(n),
            cooldown=cap.default_cooldown(n),
        ).metrics
        return bool(m["steady_state"])

    assert steady(0.7 * measured.capacity_wps)
    assert not steady(2.0 * measured.capacity_wps)


def test_load_is_a_fraction_of_the_cached_capacity(
    measured: cap.CapacityResult, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    key = cap.cache_key(SPEC, WORKLOAD)
    cap.store_result(key, measured)

    def no_measuring(*_a: object, **_k: object) -> cap.CapacityResult:
        raise AssertionError("a cached figure must not be measured again")

    monkeypatch.setattr(cap, "measure_capacity", no_measuring)
    assert cap.capacity_wps(SPEC, WORKLOAD) == measured.capacity_wps
    jobs = build_jobs(
        ClusterTables(SPEC), Scenario(workload=WORKLOAD, workflows=2000, load=0.5, seed=1)
    )
    arrivals = np.array([j.arrival for j in jobs])
    rate = (arrivals.size - 1) / (arrivals.max() - arrivals.min())
    assert rate == pytest.approx(0.5 * measured.capacity_wps, rel=0.06)


def test_the_cache_key_follows_content_not_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    src = Path("configs/workflows/support-agent.json").read_text()
    a.write_text(src)
    b.write_text(src.replace('"support-agent"', '"support-agent-2"', 1))
    assert cap.workload_fingerprint(str(a)) != cap.workload_fingerprint(str(b))
    assert cap.cache_key(SPEC, "react") != cap.cache_key(get_cluster("hetero-8"), "react")
    assert cap.cache_key(SPEC, "react") == cap.cache_key(get_cluster("hetero-4"), "react")


def test_capacity_cli_reports_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(
        app, ["capacity", "--cluster", "hetero-16", "--workload", "agentic-mix", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["capacity_wps"] > 0 and payload["cluster"] == "hetero-16"
    assert payload["cached"] is True  # the shipped table holds hetero-16


def test_a_bad_run_length_override_is_one_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESCHED_CAPACITY_WORKFLOWS", "many")
    with pytest.raises(cap.InputError, match="SCALESCHED_CAPACITY_WORKFLOWS"):
        cap.workflows_for(4)
