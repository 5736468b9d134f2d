"""Max load at SLO: the load a policy takes before its p99 slowdown breaks the target."""

from __future__ import annotations

import math

from scalesched.eval.slo import SloSpec, max_load_one, meets_slo, slo_markdown, summarise_slo


def test_an_overloaded_run_never_meets_the_slo() -> None:
    assert meets_slo({"steady_state": True, "p99_slowdown": 2.0}, 3.0)
    assert not meets_slo({"steady_state": True, "p99_slowdown": 4.0}, 3.0)
    assert not meets_slo({"steady_state": False, "p99_slowdown": 1.5}, 3.0)


def test_a_looser_slo_admits_at_least_as_much_load() -> None:
    def max_load(slo: float) -> float:
        spec = SloSpec("eft", 4, 0, "react", 400, "hetero-4", slo)
        row = max_load_one(spec)
        assert row["status"] == "ok"
        return float(row["max_load_at_slo"])

    tight, loose = max_load(2.0), max_load(20.0)
    assert 0 <= tight <= loose <= 1.6
    assert loose > 0.3  # a lax target is met well into the load range


def test_summary_has_a_row_per_policy_and_size() -> None:
    rows = [
        {"policy": "eft", "n_servers": 4, "seed": s, "status": "ok", "max_load_at_slo": v}
        for s, v in enumerate([0.6, 0.7, 0.8])
    ]
    summary = summarise_slo(rows, 5.0)
    entry = summary["by_n"][4]["eft"]
    assert math.isclose(entry["max_load_at_slo"], 0.7) and entry["seeds"] == 3
    assert "| 4 | eft | 0.70 ±" in slo_markdown(summary)
