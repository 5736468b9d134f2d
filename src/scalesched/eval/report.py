"""Turn study rows into results.csv, summary.md / JSON and plots."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scalesched.eval.study import STATUS_OK, mean_ci
from scalesched.policies import HEURISTICS

FIRST_COLUMNS = ["policy", "n_servers", "seed", "status", "workload", "load"]


def write_results_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    keys: list[str] = list(FIRST_COLUMNS)
    for row in rows:
        keys += [k for k in row if k not in keys]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def _values(rows: Sequence[dict[str, Any]], policy: str, n: int, key: str) -> list[float]:
    return [
        float(r[key])
        for r in rows
        if r["policy"] == policy
        and r["n_servers"] == n
        and r.get("status") == STATUS_OK
        and key in r
    ]


def summarise(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> dict[str, Any]:
    """Per N and policy: mean +- 95% CI of mean and p95 response time, ratios, SRR gain."""
    sizes = sorted({int(r["n_servers"]) for r in rows})
    out: dict[str, Any] = {"sizes": sizes, "policies": list(policies), "by_n": {}}
    for n in sizes:
        entry: dict[str, Any] = {}
        for p in policies:
            rt = _values(rows, p, n, "avg_response_time_s")
            if not rt:
                entry[p] = {"status": "unsupported"}
                continue
            m, ci = mean_ci(rt)
            p95, p95_ci = mean_ci(_values(rows, p, n, "p95_response_time_s"))
            lb_ratio, _ = mean_ci(_values(rows, p, n, "lower_bound_ratio"))
            entry[p] = {
                "mean_rt": m,
                "mean_rt_ci": ci,
                "p95_rt": p95,
                "p95_rt_ci": p95_ci,
                "lower_bound_ratio": lb_ratio,
                "runs": len(rt),
            }
        heuristics = [p for p in policies if p in HEURISTICS and "mean_rt" in entry[p]]
        best = min(heuristics, key=lambda p: entry[p]["mean_rt"]) if heuristics else None
        for p in policies:
            if best and "mean_rt" in entry[p]:
                entry[p]["ratio_to_best_heuristic"] = entry[p]["mean_rt"] / entry[best]["mean_rt"]
                paired, paired_ci = paired_ratio(rows, p, best, n)
                entry[p]["paired_ratio_to_best"] = paired
                entry[p]["paired_ratio_to_best_ci"] = paired_ci
            if "mean_rt" in entry[p]:
                steady = _values(rows, p, n, "steady_state")
                entry[p]["steady_runs"] = int(sum(steady))
        srr = _srr_gain(rows, n)
        out["by_n"][n] = {"policies": entry, "best_heuristic": best, **srr}
    return out


def paired_ratio(
    rows: Sequence[dict[str, Any]], policy: str, baseline: str, n: int
) -> tuple[float, float]:
    """Mean over seeds of policy/baseline mean response time on the same workload, with the
    half-width of its 95% CI: the seed-paired comparison (common random numbers)."""

    def by_seed(p: str) -> dict[int, float]:
        return {
            int(r["seed"]): float(r["avg_response_time_s"])
            for r in rows
            if r["policy"] == p and r["n_servers"] == n and r.get("status") == STATUS_OK
        }

    a, b = by_seed(policy), by_seed(baseline)
    common = sorted(set(a) & set(b))
    return mean_ci([a[s] / b[s] for s in common]) if common else (math.nan, math.nan)


def _srr_gain(rows: Sequence[dict[str, Any]], n: int) -> dict[str, float]:
    """1 - scale/scale-nosrr on mean response time, seed-paired, when both were run."""
    gains: dict[str, float] = {}
    for with_srr, without in (("scale", "scale-nosrr"), ("scale-ssm-srr", "scale-ssm")):
        a = {
            r["seed"]: float(r["avg_response_time_s"])
            for r in rows
            if r["policy"] == with_srr and r["n_servers"] == n and r.get("status") == STATUS_OK
        }
        b = {
            r["seed"]: float(r["avg_response_time_s"])
            for r in rows
            if r["policy"] == without and r["n_servers"] == n and r.get("status") == STATUS_OK
        }
        common = sorted(set(a) & set(b))
        if common:
            m, ci = mean_ci([1 - a[s] / b[s] for s in common])
            key = "srr_gain" if with_srr == "scale" else "srr_gain_ssm"
            gains[key] = m
            gains[f"{key}_ci"] = ci
    return gains


def _fmt(x: float, ci: float | None = None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if ci is None or math.isnan(ci):
        return f"{x:.{digits}f}"
    return f"{x:.{digits}f} ± {ci:.{digits}f}"


def summary_markdown(summary: dict[str, Any], header: str = "") -> str:
    lines = [header] if header else []
    for n in summary["sizes"]:
        block = summary["by_n"][n]
        lines.append(f"\n### N = {n} (best heuristic: {block['best_heuristic'] or 'n/a'})\n")
        lines.append(
            "| policy | mean RT (s) | p95 RT (s) | RT / lower bound | RT / best heuristic "
            "(seed-paired, 95% CI) | steady runs |"
        )
        lines.append("|---|---|---|---|---|---|")
        for p in summary["policies"]:
            e = block["policies"][p]
            if "mean_rt" not in e:
                lines.append(f"| {p} | cannot run at N={n} | | | | |")
                continue
            paired = _fmt(
                e.get("paired_ratio_to_best", math.nan), e.get("paired_ratio_to_best_ci"), 3
            )
            lines.append(
                f"| {p} | {_fmt(e['mean_rt'], e['mean_rt_ci'])} | "
                f"{_fmt(e['p95_rt'], e['p95_rt_ci'])} | {_fmt(e['lower_bound_ratio'])} | "
                f"{paired} | "
                f"{e.get('steady_runs', 0)}/{e['runs']} |"
            )
        for key, label in (
            ("srr_gain", "SRR gain (1 - scale/scale-nosrr)"),
            ("srr_gain_ssm", "SRR gain with scalable softmax"),
        ):
            if key in block:
                lines.append(
                    f"\n{label}: {100 * block[key]:.1f}% "
                    f"(95% CI ± {100 * block[key + '_ci']:.1f} points)"
                    if not math.isnan(block[key + "_ci"])
                    else f"\n{label}: {100 * block[key]:.1f}%"
                )
    lines.append("\nMean ± half-width of the 95% confidence interval over seeds (Student t).")
    return "\n".join(lines) + "\n"


def plot_all(rows: Sequence[dict[str, Any]], summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    sizes = summary["sizes"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colours = [plt.get_cmap("tab20")(k) for k in range(20)]
    for i, p in enumerate(summary["policies"]):
        xs, ys, cis = [], [], []
        for n in sizes:
            e = summary["by_n"][n]["policies"][p]
            if "mean_rt" in e:
                xs.append(n)
                ys.append(e["mean_rt"])
                cis.append(0.0 if math.isnan(e["mean_rt_ci"]) else e["mean_rt_ci"])
        if not xs:
            continue
        # Learned policies solid, heuristics dashed; 20 colours so no two lines share one.
        style = "--" if p in HEURISTICS else "-"
        line = ax.plot(
            xs,
            ys,
            style,
            marker="o",
            label=p,
            color=colours[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20],
        )[0]
        ax.fill_between(
            xs,
            [y - c for y, c in zip(ys, cis, strict=True)],
            [y + c for y, c in zip(ys, cis, strict=True)],
            alpha=0.15,
            color=line.get_color(),
        )
    ax.set_xlabel("servers N")
    ax.set_ylabel("mean response time (s, log scale)")
    ax.set_yscale("log")
    ax.set_title("mean workflow response time vs cluster size (95% CI)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "response_time_vs_n.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    gains = [
        (n, summary["by_n"][n].get("srr_gain"), summary["by_n"][n].get("srr_gain_ci"))
        for n in sizes
    ]
    gains = [(n, g, c) for n, g, c in gains if g is not None]
    if gains:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.errorbar(
            [g[0] for g in gains],
            [100 * g[1] for g in gains],
            yerr=[0 if math.isnan(g[2]) else 100 * g[2] for g in gains],
            marker="o",
            capsize=3,
            label="measured",
        )
        ax.axhline(8.9, color="grey", linestyle="--", label="paper, N=48: 8.9%")
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_xlabel("servers N")
        ax.set_ylabel("SRR gain (%)  = 1 - scale / scale-nosrr")
        ax.set_title("SRR gain in mean response time")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / "srr_gain_vs_n.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    feature_rows = [r for r in rows if "feature_var" in r and r.get("status") == STATUS_OK]
    # Drift needs more than one N: leave out fixed-size networks (mlp-16).
    sizes_of: dict[str, set[int]] = {}
    for r in feature_rows:
        sizes_of.setdefault(r["policy"], set()).add(int(r["n_servers"]))
    feature_rows = [r for r in feature_rows if len(sizes_of[r["policy"]]) > 1]
    if feature_rows:
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
        for p in sorted({r["policy"] for r in feature_rows}):
            for ax, key, label in zip(
                axes,
                ("feature_mean", "feature_var", "feature_offdiag_corr"),
                ("mean", "variance", "mean |off-diagonal corr|"),
                strict=True,
            ):
                xs = sorted({int(r["n_servers"]) for r in feature_rows if r["policy"] == p})
                ys = [
                    mean_ci(
                        [
                            float(r[key])
                            for r in feature_rows
                            if r["policy"] == p and r["n_servers"] == n
                        ]
                    )[0]
                    for n in xs
                ]
                ax.plot(xs, ys, marker="o", label=p)
                ax.set_title(f"attention feature {label}")
                ax.set_xlabel("servers N")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        path = out / "attention_feature_vs_n.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
