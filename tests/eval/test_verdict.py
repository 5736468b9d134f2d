"""The study's guard rails and verdict: ratios only from steady runs, one computed line."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scalesched.eval import report
from scalesched.eval.study import STATUS_OK

FACTOR = {"scale": 1.02, "eft": 1.10, "tail": 1.0, "soft_eft": 1.03, "random": 0.5}
"""Each policy's response time over tail's on every seed (random: faster, not a candidate)."""


def rows(
    unsteady: set[tuple[str, int]] = frozenset(), sizes: tuple[int, ...] = (16, 32)
) -> list[dict[str, Any]]:  # noqa: E501
    out = []
    for n in sizes:
        for seed in range(3):
            base = 30.0 + seed + n / 16
            for p, f in FACTOR.items():
                out.append(
                    {
                        "policy": p,
                        "n_servers": n,
                        "seed": seed,
                        "status": STATUS_OK,
                        "avg_response_time_s": base * f,
                        "p95_response_time_s": 2 * base * f,
                        "lower_bound_ratio": 1.2 * f,
                        "steady_state": (p, n) not in unsteady or seed != 0,
                    }
                )
    return out


def test_the_best_heuristic_is_the_registry_s_not_the_fastest_policy() -> None:
    summary = report.summarise(rows(), list(FACTOR))
    assert summary["by_n"][16]["best_heuristic"] == "tail"  # random is faster but no candidate
    assert "heft_online" in summary["best_heuristic_candidates_missing"]
    e = summary["by_n"][16]["policies"]["scale"]
    assert e["paired_ratio_to_best"] == pytest.approx(1.02)
    assert "candidates not run: heft_online" in report.summary_markdown(summary)


def test_verdict_is_computed_from_the_runs() -> None:
    data = rows()
    summary = report.summarise(data, list(FACTOR))
    line = report.verdict(data, summary, "scale")
    assert line.startswith("Verdict: scale is 1.020x the best heuristic (tail) at N = 16, 32")
    assert "over 6 runs" in line and "95% CI [1.020, 1.020]" in line
    assert "slower than the best heuristic" in line
    assert "1.22x the lower bound (22% above it)" in line  # 1.2 * 1.02


def test_verdict_names_each_size_s_best_when_it_changes() -> None:
    data = [r for r in rows() if not (r["n_servers"] == 32 and r["policy"] == "tail")]
    summary = report.summarise(data, list(FACTOR))
    line = report.verdict(data, summary, "scale")
    assert "(tail at N = 16; soft_eft at N = 32)" in line


def test_a_ratio_from_a_run_off_steady_state_is_withheld_unless_forced() -> None:
    data = rows(unsteady={("tail", 32)})
    summary = report.summarise(data, list(FACTOR))
    at32, at16 = summary["by_n"][32]["policies"], summary["by_n"][16]["policies"]
    assert "paired_ratio_to_best" not in at32["scale"]  # its best heuristic was not steady
    assert "lower_bound_ratio" not in at32["tail"] and "ratio_withheld" in at32["scale"]
    assert at16["scale"]["paired_ratio_to_best"] == pytest.approx(1.02)
    text = report.summary_markdown(summary)
    assert "| scale |" in text and "not steady | not steady | 3/3 |" in text
    assert report.UNSTEADY_NOTE in text
    assert report.verdict(data, summary, "scale").startswith("Verdict: none for scale")

    forced = report.summarise(data, list(FACTOR), force=True)
    assert forced["by_n"][32]["policies"]["scale"]["paired_ratio_to_best"] == pytest.approx(1.02)
    assert "1.020 ± 0.000 (not steady)" in report.summary_markdown(forced)
    line = report.verdict(data, forced, "scale", force=True)
    assert "1.020x" in line and "[not steady: 1 run]" in line


def test_srr_gain_is_withheld_when_either_side_was_not_steady() -> None:
    data = rows(unsteady={("scale", 16)})
    for r in [r for r in data if r["policy"] == "scale"]:
        data.append(
            {**r, "policy": "scale-nosrr", "avg_response_time_s": r["avg_response_time_s"] * 1.1}
        )  # noqa: E501
    summary = report.summarise(data, [*FACTOR, "scale-nosrr"])
    assert "srr_gain" not in summary["by_n"][16] and "srr_gain_withheld" in summary["by_n"][16]
    assert summary["by_n"][32]["srr_gain"] == pytest.approx(1 - 1 / 1.1)
    assert "SRR gain (1 - scale/scale-nosrr): not steady" in report.summary_markdown(summary)
    assert not math.isnan(summary["by_n"][32]["srr_gain_ci"])
