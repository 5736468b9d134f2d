"""The study end to end: runs, results.csv, summary.md/.json and plots in one folder."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scalesched.eval.report import (
    json_ready,
    plot_all,
    summarise,
    summary_markdown,
    verdict,
    write_results_csv,
)
from scalesched.eval.study import StudyConfig, config_dict, run_study
from scalesched.policies import is_learned
from scalesched.runs.length import (
    DEFAULT_PRECISION,
    Attempt,
    check_steady_arrivals,
    grow,
    span_in_responses,
)


def gantt_of_one_run(cfg: StudyConfig, out: Path) -> Path:
    """A Gantt chart of the first policy at the smallest N, first seed."""
    from scalesched.policies import get_policy
    from scalesched.runs.setup import Scenario, prepare, run
    from scalesched.sim.trace import plot_gantt

    n, seed, policy = min(cfg.nodes), cfg.seeds[0], cfg.policies[0]
    setup = prepare(
        cfg.cluster_for(n),
        Scenario(
            workload=cfg.workload,
            workflows=min(cfg.workflows or 60, 60),
            load=cfg.load,
            seed=seed,
            arrivals=cfg.arrivals,
            residency=cfg.residency,
        ),
        deployment=cfg.deployment,
    )
    cluster = setup.cluster
    scheduler = get_policy(policy)
    if not scheduler.supports(n):
        scheduler = get_policy("eft")
        policy = "eft"
    result = run(setup, scheduler, warmup=0, cooldown=0, record_trace=True)
    path = out / "gantt.png"
    plot_gantt(
        result.trace,
        result.server_names,
        path,
        title=f"{policy} on {cluster.name}, {cfg.workload}, seed {seed}",
    )
    return path


def _world_text(rows: list[dict[str, Any]]) -> str:
    """The world of the runs, as the summary names it (each size has its own plan)."""
    worlds = {(str(r.get("world", "dynamic")), str(r.get("deployment", ""))) for r in rows}
    names = sorted({w for w, _ in worlds})
    plans = sorted({p for _, p in worlds if p})
    text = "world: " + ", ".join(names)
    notes = sorted({str(r["world_note"]) for r in rows if r.get("world_note")})
    if plans:
        text += f" (deployments {', '.join(f'`{p}`' for p in plans)})"
    return text + "".join(f"; note: {n}" for n in notes)


def _clusters_text(cfg: StudyConfig) -> str:
    if cfg.clusters:
        return ", ".join(f"`{c}` (N = {n})" for n, c in zip(cfg.nodes, cfg.clusters, strict=True))
    return f"`{cfg.cluster_family}-N`"


def run_and_report(
    cfg: StudyConfig,
    out: Path,
    *,
    jobs: int | None = None,
    on_done: Callable[[int, int], None] | None = None,
    title: str = "scalesched evaluation",
    executor: str = "process",
    ray_address: str | None = None,
    slo: float | None = None,
    force: bool = False,
    precision: float = DEFAULT_PRECISION,
    max_workflows: int | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the study (``cfg.workflows`` None: grown to ``precision``, ``run_to_precision``)
    and write its report; with ``slo``, also search each policy's max load
    at that SLO (``scalesched.eval.slo``; six runs per policy, size and seed). ``force``
    keeps ratios from runs off steady state (marked) instead of withholding them.
    ``summary["verdict"]`` is the one-line verdict on the first learned policy (not a
    heuristic), when there is one."""
    out.mkdir(parents=True, exist_ok=True)

    def study(c: StudyConfig) -> list[dict[str, Any]]:
        return run_study(c, jobs=jobs, on_done=on_done, executor=executor, ray_address=ray_address)

    auto = cfg.workflows is None
    if auto:
        rows, cfg, tried = run_to_precision(cfg, study, precision, cap=max_workflows, say=say)
    else:
        rows = study(cfg)
    write_results_csv(rows, out / "results.csv")
    summary = summarise(rows, cfg.policies, force=force)
    length = f"{cfg.workflows} workflows per run"
    if auto:
        summary["workflows_auto"] = [dataclasses.asdict(a) for a in tried]
        summary["precision"] = precision
        length += (
            f" (--workflows auto: {', '.join(str(a.workflows) for a in tried)} tried for a "
            f"95% CI within {100 * precision:g}%; "
            + ("reached" if tried[-1].precise(precision) else "not reached, the cap")
            + ")"
        )
    header = (
        f"# {title}\n\nWorkload `{cfg.workload}` at load {cfg.load}, {length}, clusters "
        f"{_clusters_text(cfg)}, seeds {', '.join(map(str, cfg.seeds))}; {_world_text(rows)}."
    )
    text = summary_markdown(summary, header)
    learned = [p for p in cfg.policies if is_learned(p)]
    if learned:
        summary["verdict"] = verdict(rows, summary, learned[0], force=force)
        text += f"\n{summary['verdict']}\n"
    if slo is not None:
        from scalesched.eval.slo import run_slo_study, slo_markdown, summarise_slo

        slo_rows = run_slo_study(cfg, slo, jobs=jobs)
        write_results_csv(slo_rows, out / "slo.csv")
        summary["max_load_at_slo"] = summarise_slo(slo_rows, slo)
        text += slo_markdown(summary["max_load_at_slo"])
    (out / "summary.md").write_text(text)
    summary["config"] = config_dict(cfg)
    (out / "summary.json").write_text(
        json.dumps(json_ready(summary), indent=1, default=str, allow_nan=False)
    )
    summary["plots"] = [str(p) for p in plot_all(rows, summary, out)]
    summary["plots"].append(str(gantt_of_one_run(cfg, out)))
    return summary


def run_to_precision(
    cfg: StudyConfig,
    study: Callable[[StudyConfig], list[dict[str, Any]]],
    precision: float,
    *,
    cap: int | None = None,
    say: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], StudyConfig, list[Attempt]]:
    """``--workflows auto``: the study at doubling run lengths until its figure is within
    ``precision`` (``study_attempt``); the last rows, the config that made them and every
    attempt."""
    check_steady_arrivals(cfg.arrivals)
    last: dict[str, Any] = {}

    def attempt_at(n: int) -> Attempt:
        used = dataclasses.replace(cfg, workflows=n)
        rows = study(used)
        last.update(rows=rows, cfg=used)
        return study_attempt(rows, used)

    _, tried = grow(attempt_at, max(cfg.nodes), precision, cap=cap, say=say)
    return last["rows"], last["cfg"], tried


def study_attempt(rows: list[dict[str, Any]], cfg: StudyConfig) -> Attempt:
    """What ``auto`` judges a study by: with a learned policy, its paired ratio to the best
    heuristic at the size where that ratio is least precise (the verdict's figure); without
    one, the best heuristic's mean response time, its per-run batch-means intervals pooled
    over seeds. Steady: every run of both (or of the best heuristic) was."""
    assert cfg.workflows is not None
    summary = summarise(rows, cfg.policies, force=True)
    learned = next((p for p in cfg.policies if is_learned(p)), None)
    worst = Attempt(cfg.workflows, math.nan, math.inf, False)
    best_rel = -1.0
    for n in summary["sizes"]:
        block = summary["by_n"][n]
        best = block["best_heuristic"]
        if best is None:
            continue
        entries = block["policies"]
        focus = learned if learned and "mean_rt" in entries.get(learned, {}) else None
        runs = [r for r in rows if r["n_servers"] == n and r["policy"] in {best, focus}]
        steady = all(bool(r.get("steady_state")) for r in runs)
        overloaded = any(bool(r.get("overloaded")) for r in runs if r["policy"] == best)
        if focus is not None:
            figure = float(entries[focus]["paired_ratio_to_best"])
            half = float(entries[focus]["paired_ratio_to_best_ci"])
        else:
            own = [r for r in runs if r["policy"] == best]
            figure = float(entries[best]["mean_rt"])
            half = math.sqrt(sum(float(r["avg_response_time_ci_s"]) ** 2 for r in own)) / len(own)
        spans = [span_in_responses(r) for r in runs]
        span = min((x for x in spans if x is not None), default=None)
        a = Attempt(cfg.workflows, figure, half, steady, overloaded, span)
        rel = a.relative if math.isfinite(a.relative) else math.inf
        if not a.steady or rel > best_rel:
            worst, best_rel = a, rel
            if not a.steady:
                break
    return worst
