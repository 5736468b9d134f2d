"""Turn study rows into results.csv, summary.md / JSON and plots."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scalesched.eval.study import STATUS_OK
from scalesched.eval.windows import paired_series
from scalesched.policies import (
    BEST_HEURISTIC_CANDIDATES,
    HEURISTICS,
    base_name,
    best_heuristic,
    is_learned,
)
from scalesched.stats import mean_ci, paired_batch_ratio, paired_ratio_ci, paired_ratios

FIRST_COLUMNS = ["policy", "n_servers", "seed", "status", "workload", "load"]


def json_ready(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (``null``): an undefined
    figure, such as a confidence interval from one seed, is printed as such, never as the
    ``NaN`` that strict JSON readers reject."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def write_results_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One line per run; the per-workflow series a study keeps in memory (keys starting
    with ``_``) are not written."""
    keys: list[str] = list(FIRST_COLUMNS)
    for row in rows:
        keys += [k for k in row if k not in keys and not k.startswith("_")]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, restval="", extrasaction="ignore")
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


def summarise(
    rows: Sequence[dict[str, Any]], policies: Sequence[str], *, force: bool = False
) -> dict[str, Any]:
    """Per N and policy: mean +- 95% CI of mean and p95 response time, ratios, SRR gain.

    The best heuristic of each N is ``policies.best_heuristic`` over the policies run. A
    ratio (to the best heuristic, to the lower bound, the SRR gain) is withheld, with
    ``ratio_withheld`` saying why, when a run behind it did not reach steady state: such a
    run measured its start-up or a queue still growing, not the policy. ``force`` keeps the
    figures, with the same note beside them."""
    sizes = sorted({int(r["n_servers"]) for r in rows})
    out: dict[str, Any] = {"sizes": sizes, "policies": list(policies), "by_n": {}}
    out["best_heuristic_candidates_missing"] = [
        p for p in BEST_HEURISTIC_CANDIDATES if p not in policies
    ]
    for n in sizes:
        entry = {p: _policy_entry(rows, p, n) for p in policies}
        best = best_heuristic({p: e["mean_rt"] for p, e in entry.items() if "mean_rt" in e})
        for p in policies:
            if best and "mean_rt" in entry[p]:
                entry[p]["ratio_to_best_heuristic"] = entry[p]["mean_rt"] / entry[best]["mean_rt"]
                paired, paired_ci, method = paired_ratio_with_method(rows, p, best, n)
                entry[p]["paired_ratio_to_best"] = paired
                entry[p]["paired_ratio_to_best_ci"] = paired_ci
                entry[p]["paired_ratio_method"] = method
        srr: dict[str, Any] = dict(_srr_gain(rows, n))
        _withhold_unsteady(entry, best, srr, force)
        out["by_n"][n] = {"policies": entry, "best_heuristic": best, **srr}
    return out


RATIO_KEYS = (
    "ratio_to_best_heuristic",
    "paired_ratio_to_best",
    "paired_ratio_to_best_ci",
    "lower_bound_ratio",
)
"""The ratios of a summary entry that a run off steady state makes meaningless."""


def _policy_entry(rows: Sequence[dict[str, Any]], p: str, n: int) -> dict[str, Any]:
    rt = _values(rows, p, n, "avg_response_time_s")
    if not rt:
        return {"status": "unsupported"}
    m, ci = mean_ci(rt)
    p95, p95_ci = mean_ci(_values(rows, p, n, "p95_response_time_s"))
    lb_ratio, _ = mean_ci(_values(rows, p, n, "lower_bound_ratio"))
    return {
        "mean_rt": m,
        "mean_rt_ci": ci,
        "p95_rt": p95,
        "p95_rt_ci": p95_ci,
        "lower_bound_ratio": lb_ratio,
        "runs": len(rt),
        "steady_runs": int(sum(_values(rows, p, n, "steady_state"))),
    }


def _unsteady(e: dict[str, Any]) -> bool:
    return "mean_rt" in e and e["steady_runs"] < e["runs"]


def _withhold_unsteady(
    entry: dict[str, dict[str, Any]], best: str | None, srr: dict[str, Any], force: bool
) -> None:
    """Mark (and, without ``force``, drop) every ratio computed from a run that was not at
    steady state: the policy's own runs, or the best heuristic's for the ratio to it."""
    best_unsteady = best is not None and _unsteady(entry[best])
    for p, e in entry.items():
        if "mean_rt" not in e:
            continue
        why = []
        if _unsteady(e):
            why.append(f"{p}: {e['runs'] - e['steady_runs']}/{e['runs']} runs not steady")
        if best_unsteady and p != best:
            why.append(f"best heuristic {best}: not steady in every run")
        if why:
            e["ratio_withheld"] = "; ".join(why)
            if not force:
                for key in RATIO_KEYS:
                    e.pop(key, None)
    for with_srr, without, key in (
        ("scale", "scale-nosrr", "srr_gain"),
        ("scale-ssm-srr", "scale-ssm", "srr_gain_ssm"),
    ):
        if key in srr and (_unsteady(entry.get(with_srr, {})) or _unsteady(entry.get(without, {}))):
            srr[f"{key}_withheld"] = f"{with_srr} or {without}: not steady in every run"
            if not force:
                srr.pop(key)
                srr.pop(f"{key}_ci")


def _rt_by_seed(rows: Sequence[dict[str, Any]], policy: str, n: int) -> dict[int, float]:
    """Mean response time of each completed run of ``policy`` at size ``n``, by seed."""
    return {
        int(r["seed"]): float(r["avg_response_time_s"])
        for r in rows
        if r["policy"] == policy and r["n_servers"] == n and r.get("status") == STATUS_OK
    }


def paired_ratio(
    rows: Sequence[dict[str, Any]], policy: str, baseline: str, n: int
) -> tuple[float, float]:
    """Mean over seeds of policy/baseline mean response time on the same workload, with the
    half-width of its 95% CI: the seed-paired comparison (common random numbers)."""

    return paired_ratio_ci(_rt_by_seed(rows, policy, n), _rt_by_seed(rows, baseline, n))


REPLICATIONS = "seed-paired replications (Student t over seeds)"
"""The interval of a ratio read back from results without per-workflow series."""


def paired_ratio_with_method(
    rows: Sequence[dict[str, Any]], policy: str, baseline: str, n: int
) -> tuple[float, float, str]:
    """The paired ratio, its half-width and the method: paired batch means on the shared
    window when the rows carry their series (every study run here), else seed-paired
    replications. The rule is fixed, never the tighter of the two."""
    from scalesched.eval.windows import paired_ratio_rows

    ci = paired_ratio_rows(rows, policy, baseline, n)
    if ci is not None:
        return ci.ratio, ci.half_width, ci.method
    m, h = paired_ratio(rows, policy, baseline, n)
    return m, h, REPLICATIONS


def _srr_gain(rows: Sequence[dict[str, Any]], n: int) -> dict[str, float]:
    """1 - scale/scale-nosrr on mean response time, seed-paired, when both were run."""
    gains: dict[str, float] = {}
    for with_srr, without in (("scale", "scale-nosrr"), ("scale-ssm-srr", "scale-ssm")):
        ratios = paired_ratios(_rt_by_seed(rows, with_srr, n), _rt_by_seed(rows, without, n))
        if ratios:
            m, ci = mean_ci([1 - r for r in ratios])
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


NOT_STEADY = "not steady"
"""What a table prints for a ratio withheld because a run behind it was not steady."""


def _ratio_cells(e: dict[str, Any]) -> tuple[str, str]:
    """The lower-bound and best-heuristic ratio cells of a row, marked when not steady."""
    if "lower_bound_ratio" not in e:  # withheld
        return NOT_STEADY, NOT_STEADY
    mark = f" ({NOT_STEADY})" if "ratio_withheld" in e else ""
    paired = _fmt(e.get("paired_ratio_to_best", math.nan), e.get("paired_ratio_to_best_ci"), 3)
    return _fmt(e["lower_bound_ratio"]) + mark, paired + mark


def _candidates_line(summary: dict[str, Any]) -> str:
    run = [p for p in BEST_HEURISTIC_CANDIDATES if p in summary["policies"]]
    missing = summary.get("best_heuristic_candidates_missing", [])
    line = f"Best heuristic: the lowest mean response time of {', '.join(run) or 'none'}"
    return line + (f" (candidates not run: {', '.join(missing)})." if missing else ".")


def summary_markdown(summary: dict[str, Any], header: str = "") -> str:
    lines = [header] if header else []
    lines.append(_candidates_line(summary))
    withheld = False
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
            withheld = withheld or "ratio_withheld" in e
            lb_cell, paired_cell = _ratio_cells(e)
            lines.append(
                f"| {p} | {_fmt(e['mean_rt'], e['mean_rt_ci'])} | "
                f"{_fmt(e['p95_rt'], e['p95_rt_ci'])} | {lb_cell} | {paired_cell} | "
                f"{e.get('steady_runs', 0)}/{e['runs']} |"
            )
        for key, label in (
            ("srr_gain", "SRR gain (1 - scale/scale-nosrr)"),
            ("srr_gain_ssm", "SRR gain with scalable softmax"),
        ):
            mark = f" ({NOT_STEADY})" if f"{key}_withheld" in block else ""
            if key in block:
                lines.append(
                    f"\n{label}: {100 * block[key]:.1f}% "
                    f"(95% CI ± {100 * block[key + '_ci']:.1f} points){mark}"
                    if not math.isnan(block[key + "_ci"])
                    else f"\n{label}: {100 * block[key]:.1f}%{mark}"
                )
            elif mark:
                lines.append(f"\n{label}: {NOT_STEADY}")
                withheld = True
    lines.append(
        "\nMean and p95: ± half-width of the 95% confidence interval over seeds (Student t). "
        f"RT / best heuristic: 95% CI by {_ratio_methods(summary)}; every policy of a seed is "
        "measured over the same workflows (from the largest warm-up cut MSER found among its "
        "steady runs)."
    )
    if withheld:
        lines.append(UNSTEADY_NOTE)
    return "\n".join(lines) + "\n"


def _ratio_methods(summary: dict[str, Any]) -> str:
    """The methods behind the summary's ratio intervals, named once each."""
    found = [
        e["paired_ratio_method"]
        for n in summary["sizes"]
        for e in summary["by_n"][n]["policies"].values()
        if "paired_ratio_method" in e
    ]
    kinds = dict.fromkeys(m.split(" (")[0] for m in found)
    return ", ".join(kinds) or "no ratio"


UNSTEADY_NOTE = (
    "'not steady': a run behind the ratio (the policy's, or the best heuristic's) did not "
    "reach steady state (too few measured workflows to tell, or a queue still building), so "
    "it measured the run's start-up or an overload, not the policy; rerun with more "
    "--workflows or a lower --load (eval --force prints the figures, marked)."
)


def _sizes_text(sizes: Sequence[int]) -> str:
    return ", ".join(map(str, sizes))


def _best_text(best_of: dict[int, str]) -> str:
    """``tail``, or ``tail at N = 16, 32; soft_eft at 48`` when it changes with N."""
    names = list(dict.fromkeys(best_of.values()))
    if len(names) == 1:
        return names[0]
    return "; ".join(
        f"{b} at N = {_sizes_text([n for n in best_of if best_of[n] == b])}" for b in names
    )


def verdict(
    rows: Sequence[dict[str, Any]], summary: dict[str, Any], policy: str, *, force: bool = False
) -> str:
    """One line: ``policy`` against the best heuristic of each N, pooled over every size and
    seed it ran (the seed-paired ratios of :func:`paired_ratio`, mean and 95% CI over the
    (N, seed) pairs), and its mean response time against the lower bound. Computed from the
    runs, never written by hand; no figure when a run behind it was not at steady state
    (unless ``force``, which marks it)."""
    best_of = {
        n: summary["by_n"][n]["best_heuristic"]
        for n in summary["sizes"]
        if summary["by_n"][n]["best_heuristic"] is not None
        and "mean_rt" in summary["by_n"][n]["policies"].get(policy, {})
    }
    if not best_of:
        return f"Verdict: none for {policy}: no size where it and a candidate heuristic both ran."
    ratios: list[float] = []
    pairs: list[tuple[Any, Any]] | None = []
    lower: list[float] = []
    unsteady = 0
    for n, best in best_of.items():
        a, b = _rt_by_seed(rows, policy, n), _rt_by_seed(rows, best, n)
        ratios += [a[s] / b[s] for s in sorted(set(a) & set(b))]
        found = paired_series(rows, policy, best, n)
        pairs = None if found is None or pairs is None else pairs + found
        lower += _values(rows, policy, n, "lower_bound_ratio")
        entries = summary["by_n"][n]["policies"]
        unsteady += sum(entries[p]["runs"] - entries[p]["steady_runs"] for p in {policy, best})
    sizes = f"N = {_sizes_text(list(best_of))}"
    if unsteady and not force:
        return (
            f"Verdict: none for {policy} at {sizes}: {unsteady} of its or the best heuristic's "
            "runs did not reach steady state (more --workflows, or --force to print the figure)."
        )
    if pairs is not None:
        pooled = paired_batch_ratio(pairs)
        mean, half, method = pooled.ratio, pooled.half_width, pooled.method
    else:
        (mean, half), method = mean_ci(ratios), REPLICATIONS
    ci = (
        f"95% CI [{mean - half:.3f}, {mean + half:.3f}] by {method}"
        if math.isfinite(half)
        else "no CI from one run"
    )
    if not math.isfinite(half):
        reading = "one run: no conclusion"
    elif mean - half > 1:
        reading = "slower than the best heuristic"
    elif mean + half < 1:
        reading = "faster than the best heuristic"
    else:
        reading = "no difference shown (the CI includes 1)"
    lb = mean_ci(lower)[0]
    mark = f" [{NOT_STEADY}: {unsteady} run{'s' if unsteady > 1 else ''}]" if unsteady else ""
    return (
        f"Verdict: {policy} is {mean:.3f}x the best heuristic ({_best_text(best_of)}) at "
        f"{sizes}, paired over {len(ratios)} runs, {ci}: {reading}; its mean response "
        f"time is {lb:.2f}x the lower bound ({100 * (lb - 1):.0f}% above it){mark}."
    )


# -- plots ------------------------------------------------------------------------------

PALETTE = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # green
    "#CC79A7",  # purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#882255",  # wine
    "#8C564B",  # brown
    "#7F7F7F",  # grey
    "#999933",  # olive
    "#332288",  # indigo
)
"""Okabe-Ito's colour-blind-safe set and six more far from them: no two lines of a figure
share a colour or come close (the old tab20 gave eft and heft_online near-identical blues).
Past twelve lines, the marker changes as well."""
MARKERS = ("o", "s", "^", "D")


def best_heuristic_overall(summary: dict[str, Any]) -> str | None:
    """The best heuristic (``policies.best_heuristic``) at the most sizes; ties: the lower
    mean over sizes of its mean response time over that size's best. For the figures: one
    line stands for "the best heuristic" across N."""
    wins: dict[str, int] = {}
    ratios: dict[str, list[float]] = {}
    for n in summary["sizes"]:
        block = summary["by_n"][n]
        best = block["best_heuristic"]
        if best is None:
            continue
        wins[best] = wins.get(best, 0) + 1
        for p, e in block["policies"].items():
            if p in BEST_HEURISTIC_CANDIDATES and "mean_rt" in e:
                ratios.setdefault(p, []).append(e["mean_rt"] / block["policies"][best]["mean_rt"])
    if not wins:
        return None
    return min(wins, key=lambda p: (-wins[p], sum(ratios[p]) / len(ratios[p])))


def default_plot_policies(summary: dict[str, Any]) -> list[str]:
    """What the main response-time figure shows: every learned policy (SCALE variants and
    checkpoints) against the best heuristic; the rest go to the ``_all`` figure."""
    learned = [p for p in summary["policies"] if is_learned(p)]
    best = best_heuristic_overall(summary)
    return [*learned, *([best] if best else [])]


def _size_axis(ax: Any, sizes: Sequence[int]) -> None:
    """Ticks at the measured N only, as plain numbers, on a log-2 axis when N spans 4x."""
    from matplotlib.ticker import FixedLocator, NullLocator

    if len(sizes) > 1 and max(sizes) >= 4 * min(sizes):
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(sizes)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(n) for n in sizes])
    ax.set_xlabel("servers N")


def _log_y_axis(ax: Any) -> None:
    """Log scale with labels 10, 20, 30, 50, 100 ... instead of 4x10^1."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _legend_outside(ax: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)


def response_time_figure(summary: dict[str, Any], policies: Sequence[str], title: str = "") -> Any:
    """Mean response time vs N with 95% CI bands, one line per policy of ``policies``."""
    import matplotlib.pyplot as plt

    sizes = summary["sizes"]
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    for i, p in enumerate(policies):
        xs, ys, cis = [], [], []
        for n in sizes:
            e = summary["by_n"][n]["policies"].get(p, {})
            if "mean_rt" in e:
                xs.append(n)
                ys.append(e["mean_rt"])
                cis.append(0.0 if math.isnan(e["mean_rt_ci"]) else e["mean_rt_ci"])
        if not xs:
            continue
        colour = PALETTE[i % len(PALETTE)]
        # Learned policies solid, heuristics dashed.
        ax.plot(
            xs,
            ys,
            "--" if base_name(p) in HEURISTICS else "-",
            marker="o",
            label=p,
            color=colour,
            lw=1.8,
        )
        ax.fill_between(
            xs,
            [y - c for y, c in zip(ys, cis, strict=True)],
            [y + c for y, c in zip(ys, cis, strict=True)],
            alpha=0.12,
            color=colour,
            linewidth=0,
        )
    _size_axis(ax, sizes)
    _log_y_axis(ax)
    ax.set_ylabel("mean response time (s)")
    ax.set_title(title or "mean workflow response time vs cluster size (95% CI bands)")
    ax.grid(alpha=0.3, which="major")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def attention_feature_figure(rows: Sequence[dict[str, Any]]) -> Any | None:
    """Mean, variance and mean |off-diagonal correlation| of the attention feature vs N, for
    networks run at more than one N (drift needs several; mlp-16 is left out)."""
    import matplotlib.pyplot as plt

    feature_rows = [r for r in rows if "feature_var" in r and r.get("status") == STATUS_OK]
    sizes_of: dict[str, set[int]] = {}
    for r in feature_rows:
        sizes_of.setdefault(r["policy"], set()).add(int(r["n_servers"]))
    feature_rows = [r for r in feature_rows if len(sizes_of[r["policy"]]) > 1]
    if not feature_rows:
        return None
    sizes = sorted({int(r["n_servers"]) for r in feature_rows})
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = (
        ("feature_mean", "mean of the feature"),
        ("feature_var", "variance of the feature"),
        ("feature_offdiag_corr", "mean |off-diagonal correlation|"),
    )
    for i, p in enumerate(sorted({r["policy"] for r in feature_rows})):
        xs = sorted(sizes_of[p])
        for ax, (key, _) in zip(axes, panels, strict=True):
            ys = [
                mean_ci(
                    [
                        float(r[key])
                        for r in feature_rows
                        if r["policy"] == p and int(r["n_servers"]) == n
                    ]
                )[0]
                for n in xs
            ]
            ax.plot(xs, ys, marker="o", label=p, color=PALETTE[i % len(PALETTE)])
    for ax, (_, label) in zip(axes, panels, strict=True):
        _size_axis(ax, sizes)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle("attention feature statistics vs cluster size (mean over seeds)")
    _legend_outside(axes[-1])
    fig.tight_layout()
    return fig


def srr_gain_figure(summary: dict[str, Any]) -> Any | None:
    import matplotlib.pyplot as plt

    gains = [
        (n, summary["by_n"][n].get("srr_gain"), summary["by_n"][n].get("srr_gain_ci"))
        for n in summary["sizes"]
    ]
    gains = [(n, g, c) for n, g, c in gains if g is not None]
    if not gains:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.errorbar(
        [g[0] for g in gains],
        [100 * g[1] for g in gains],
        yerr=[0 if math.isnan(g[2]) else 100 * g[2] for g in gains],
        marker="o",
        capsize=3,
        color=PALETTE[0],
        label="measured (95% CI)",
    )
    ax.axhline(8.9, color=PALETTE[1], linestyle="--", label="paper, N=48: 8.9%")
    ax.axhline(0, color="black", linewidth=0.5)
    _size_axis(ax, [g[0] for g in gains])
    ax.set_ylabel("SRR gain (%) = 1 - scale / scale-nosrr")
    ax.set_title("SRR gain in mean response time")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def plot_all(
    rows: Sequence[dict[str, Any]],
    summary: dict[str, Any],
    out: Path,
    policies: Sequence[str] | None = None,
) -> list[Path]:
    """Write the study's figures; return their paths.

    ``response_time_vs_n.png`` shows ``policies`` (default: the learned policies against the
    best heuristic, :func:`default_plot_policies`); ``response_time_vs_n_all.png`` every
    policy, when that is more.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []

    def save(fig: Any, name: str) -> None:
        if fig is None:
            return
        path = out / name
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)

    shown = list(policies) if policies is not None else default_plot_policies(summary)
    save(response_time_figure(summary, shown), "response_time_vs_n.png")
    if set(summary["policies"]) - set(shown):
        title = "mean response time vs cluster size, every policy (95% CI bands)"
        save(
            response_time_figure(summary, summary["policies"], title), "response_time_vs_n_all.png"
        )
    save(srr_gain_figure(summary), "srr_gain_vs_n.png")
    save(attention_feature_figure(rows), "attention_feature_vs_n.png")
    return written
