"""``eval --suite``: a tiny setting end to end against the best heuristic, and the suite's
summary (mean and worst over the settings whose runs were steady)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalesched.cluster import get_cluster
from scalesched.eval.robustness import p99_ratio, run_suite, suite_policies, suite_summary
from scalesched.eval.suite import load_suite, mix_of
from scalesched.policies import BEST_HEURISTIC_CANDIDATES

TINY: dict[str, Any] = {
    "name": "tiny",
    "version": 1,
    "policies": ["tail"],
    "seeds": {"evaluation": [90], "selection": [1000], "training_from": 100_000},
    "clusters": {
        "hetero-4": {"preset": "hetero-4"},
        "three-h100": {"servers": [{"type": "h100-80g-x4", "count": 3}, {"type": "cpu-64c"}]},
    },
    "evaluation": [
        {
            "name": "tiny-mix",
            "cluster": "hetero-4",
            "workload": "agentic-mix",
            "arrivals": "poisson",
            "load": 0.5,
            "world": "dynamic",
            "workflows": 60,
        }
    ],
    "training": [
        {
            "name": "tiny-train",
            "cluster": "three-h100",
            "workload": "react",
            "arrivals": "poisson",
            "load": 0.5,
            "world": "dynamic",
        }
    ],
    "selection": [
        {
            "name": "tiny-select",
            "cluster": "three-h100",
            "workload": "react",
            "arrivals": "bursty",
            "load": 0.7,
            "world": "dynamic",
        }
    ],
}


def test_a_tiny_setting_runs_end_to_end_quickly(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    suite = load_suite(str(path))
    lines: list[str] = []
    start = time.process_time()  # CPU time: serial runs (jobs=1) are in this process
    summary = run_suite(
        suite, suite.evaluation, ["tail"], [90], tmp_path / "out", jobs=1, say=lines.append
    )
    assert time.process_time() - start < 20
    (setting,) = summary["settings"]
    assert setting["best_heuristic"] in BEST_HEURISTIC_CANDIDATES
    tail = setting["policies"]["tail"]
    assert tail["mean_ratio"] > 0 and tail["mean_ratio_ci"] >= 0 and tail["p99_ratio"] > 0
    if setting["best_heuristic"] == "tail":
        assert tail["mean_ratio"] == pytest.approx(1.0)
    assert any(line.startswith("[1/1] tiny-mix: best heuristic") for line in lines)
    written = json.loads((tmp_path / "out" / "robustness.json").read_text())
    assert written["summary"]["tail"]["settings"] in (0, 1)
    assert "tiny-mix" in (tmp_path / "out" / "robustness.md").read_text()
    assert (tmp_path / "out" / "tiny-mix" / "results.csv").is_file()


def test_every_candidate_runs_beside_the_policies_asked() -> None:
    assert suite_policies(["scale-dagger", "tail"])[:2] == ("scale-dagger", "tail")
    assert set(BEST_HEURISTIC_CANDIDATES) <= set(suite_policies(["scale-dagger"]))


def _result(name: str, ratio: float, p99: float, steady: bool = True) -> dict[str, Any]:
    entry = {"mean_ratio": ratio, "mean_ratio_ci": 0.01, "p99_ratio": p99, "steady": steady}
    return {"name": name, "best_heuristic_steady": True, "policies": {"x": entry}}


def test_the_summary_is_the_mean_and_the_worst_over_steady_settings() -> None:
    results = [_result("a", 0.98, 1.0), _result("b", 1.2, 1.5), _result("c", 3.0, 4.0, False)]
    s = suite_summary(results, ["x"])["x"]
    assert s["mean_ratio"] == pytest.approx(1.09) and s["p99_ratio"] == pytest.approx(1.25)
    assert (s["worst_mean_ratio"], s["worst_mean_ratio_setting"]) == (1.2, "b")
    assert s["left_out"] == ["c"] and s["settings"] == 2
    forced = suite_summary(results, ["x"], force=True)["x"]
    assert forced["worst_p99_ratio_setting"] == "c"


def test_the_p99_ratio_pairs_seeds() -> None:
    rows = [
        {"policy": "x", "seed": 1, "status": "ok", "p99_response_time_s": 30.0},
        {"policy": "tail", "seed": 1, "status": "ok", "p99_response_time_s": 20.0},
        {"policy": "x", "seed": 2, "status": "ok", "p99_response_time_s": 10.0},
        {"policy": "tail", "seed": 2, "status": "ok", "p99_response_time_s": 20.0},
        {"policy": "x", "seed": 3, "status": "ok", "p99_response_time_s": 99.0},
    ]
    assert p99_ratio(rows, "x", "tail") == pytest.approx((1.5 + 0.5) / 2)


def test_a_setting_with_shaped_arrivals_is_never_counted_steady(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """azure-conv stretches a recorded hour over the run: there is no steady state to
    reach, so the row is left out of the summary even where each run's verdict passed."""
    import scalesched.eval.robustness as robustness

    monkeypatch.setattr(robustness, "_steady", lambda rows, policy: True)  # every run passed
    data = json.loads(json.dumps(TINY))
    data["evaluation"][0].update(arrivals="azure-conv", workflows=60)
    path = tmp_path / "shaped.yaml"
    path.write_text(yaml.safe_dump(data))
    suite = load_suite(str(path))
    summary = run_suite(suite, suite.evaluation, ["tail"], [90], tmp_path / "out", jobs=1)
    (setting,) = summary["settings"]
    assert setting["best_heuristic_steady"] is False
    assert setting["policies"]["tail"]["steady"] is False
    assert summary["summary"]["tail"]["left_out"] == ["tiny-mix"]


SCALED_DIR = Path(__file__).resolve().parents[2] / "configs/clusters/scaled"
SCALED = sorted(SCALED_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", SCALED, ids=lambda p: p.stem)
def test_scaled_cluster_is_a_suite_mix_at_4x_or_16x(path: Path) -> None:
    """The zero-shot cluster files keep their suite mix exactly, at 4x or 16x its 16 servers
    (docs/zero-shot.md's figures run them)."""
    suite = load_suite()
    spec = get_cluster(str(path))
    family, size = path.stem.rsplit("-", 1)
    base = suite.clusters[f"{family}-16"]
    assert len(spec.servers) == int(size) in (4 * len(base.servers), 16 * len(base.servers))
    assert mix_of(spec) == mix_of(base)


def test_every_scaled_mix_is_an_evaluation_mix() -> None:
    """Eight files, none of them a training or selection mix."""
    suite = load_suite()
    evaluation = {mix_of(suite.clusters[s.cluster]) for s in suite.settings("evaluation")}
    assert len(SCALED) == 8
    assert all(mix_of(get_cluster(str(p))) in evaluation for p in SCALED)
