"""The robustness suite's table (markdown) and files: one row per setting, a column pair
per policy (mean ratio with its 95% CI, p99 ratio), and the suite's mean and worst rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scalesched.eval.report import json_ready


def _cell(e: dict[str, Any]) -> tuple[str, str]:
    if "mean_ratio" not in e:
        return str(e.get("status", "-")), "-"
    mark = "" if e["steady"] else " (not steady)"
    return f"{e['mean_ratio']:.3f} ± {e['mean_ratio_ci']:.3f}{mark}", _num(e["p99_ratio"])


def _num(x: Any) -> str:
    return f"{float(x):.3f}" if x is not None and math.isfinite(float(x)) else "-"


def suite_markdown(summary: dict[str, Any]) -> str:
    """The table of a suite run (``run_suite``'s summary)."""
    policies = summary["policies"]
    head = ["setting", "world", "best heuristic", "workflows"]
    for p in policies:
        head += [f"{p} mean / best", f"{p} p99 / best"]
    lines = [
        f"# Robustness suite `{summary['suite']}` (version {summary['version']})",
        "",
        f"Seeds {', '.join(map(str, summary['seeds']))}; ratios of mean response time are "
        "paired batch means over the shared window with their 95% CI; p99 ratios are point "
        "estimates (mean over seeds of the per-seed ratio). Below 1: better than the best "
        "heuristic of that setting.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in summary["settings"]:
        best = str(r["best_heuristic"]) + ("" if r["best_heuristic_steady"] else " (not steady)")
        row = [r["name"], "/".join(r["world_used"]), best, str(r["workflows"])]
        for p in policies:
            row += list(_cell(r["policies"][p]))
        lines.append("| " + " | ".join(row) + " |")
    lines += _summary_rows(summary, policies, len(head))
    return "\n".join(lines) + "\n"


def _summary_rows(summary: dict[str, Any], policies: list[str], width: int) -> list[str]:
    mean = ["**suite mean**", "", "", ""]
    worst = ["**worst setting**", "", "", ""]
    notes = []
    for p in policies:
        s = summary["summary"][p]
        mean += [_num(s.get("mean_ratio")), _num(s.get("p99_ratio"))]
        worst += [
            f"{_num(s.get('worst_mean_ratio'))} ({s.get('worst_mean_ratio_setting', '-')})",
            f"{_num(s.get('worst_p99_ratio'))} ({s.get('worst_p99_ratio_setting', '-')})",
        ]
        if s["left_out"]:
            notes.append(
                f"{p}: {s['settings']} settings counted; left out (a run not steady, or no "
                f"result): {', '.join(s['left_out'])}"
            )
    rows = ["| " + " | ".join(mean) + " |", "| " + " | ".join(worst) + " |"]
    return rows + ([""] + notes if notes else [])


def write_summary(summary: dict[str, Any], out: Path) -> None:
    """``robustness.json`` and ``robustness.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "robustness.md").write_text(summary["markdown"])
    data = {k: v for k, v in summary.items() if k != "markdown"}
    (out / "robustness.json").write_text(
        json.dumps(json_ready(data), indent=1, default=str, allow_nan=False)
    )
