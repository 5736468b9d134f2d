"""The study end to end: runs, results.csv, summary.md/.json and plots in one folder."""

from __future__ import annotations

import json
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
            workflows=min(cfg.workflows, 60),
            load=cfg.load,
            seed=seed,
            arrivals=cfg.arrivals,
        ),
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
) -> dict[str, Any]:
    """Run the study and write its report; with ``slo``, also search each policy's max load
    at that SLO (``scalesched.eval.slo``; six runs per policy, size and seed). ``force``
    keeps ratios from runs off steady state (marked) instead of withholding them.
    ``summary["verdict"]`` is the one-line verdict on the first learned policy (not a
    heuristic), when there is one."""
    out.mkdir(parents=True, exist_ok=True)
    rows = run_study(cfg, jobs=jobs, on_done=on_done, executor=executor, ray_address=ray_address)
    write_results_csv(rows, out / "results.csv")
    summary = summarise(rows, cfg.policies, force=force)
    header = (
        f"# {title}\n\nWorkload `{cfg.workload}` at load {cfg.load}, {cfg.workflows} "
        f"workflows per run, clusters {_clusters_text(cfg)}, seeds "
        f"{', '.join(map(str, cfg.seeds))}."
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
