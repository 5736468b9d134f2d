"""``eval --suite``: every policy against the best heuristic of each setting of a suite.

Each setting (``scalesched.eval.suite``) is a study of one cluster: the policies asked
and every best-heuristic candidate run on the suite's evaluation seeds, at steady state
under the measuring standard of ``eval`` (MSER warm-up, the shared window, the run grown
until the learned policy's paired ratio is within the precision, ``runs.length``). The
best heuristic of a setting is ``policies.best_heuristic`` over the candidates' mean
response times there (the one definition, through ``eval.report.summarise``). Reported per
policy and setting: the paired batch-means ratio of mean response time to the best
heuristic with its 95% CI (``stats.paired_batch_ratio``) and the ratio of p99 response
times (mean over seeds of the per-seed ratio; a point estimate); and over the suite: the
mean of each ratio and the worst setting.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scalesched.eval.report import summarise, write_results_csv
from scalesched.eval.study import STATUS_OK, StudyConfig, run_study
from scalesched.eval.suite import Suite, SuiteSetting
from scalesched.policies import BEST_HEURISTIC_CANDIDATES

Say = Callable[[str], None]


def suite_policies(policies: Sequence[str]) -> tuple[str, ...]:
    """The policies asked, then every best-heuristic candidate not among them: the best
    heuristic of a setting is always chosen from the full list."""
    asked = tuple(dict.fromkeys(policies))
    return asked + tuple(p for p in BEST_HEURISTIC_CANDIDATES if p not in asked)


def cluster_reference(suite: Suite, setting: SuiteSetting, folder: Path) -> str:
    """What a worker loads the setting's cluster from: a preset's name, or a cluster file
    written under ``folder`` (the suite gives the cluster's fields inline)."""
    import yaml

    entry = suite.cluster_entries[setting.cluster]
    if "preset" in entry:
        return str(entry["preset"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{setting.cluster}.yaml"
    path.write_text(yaml.safe_dump({"name": setting.cluster, **entry}, sort_keys=False))
    return str(path)


def setting_config(
    suite: Suite,
    setting: SuiteSetting,
    policies: Sequence[str],
    seeds: Sequence[int],
    cluster: str,
    max_workflows: int | None = None,
) -> StudyConfig:
    """The study of one setting; a fixed length (shaped arrivals) is capped at
    ``max_workflows`` as a grown one is."""
    n = len(suite.clusters[setting.cluster].servers)
    fixed = setting.workflows
    if fixed is not None and max_workflows is not None:
        fixed = min(fixed, max_workflows)
    return StudyConfig(
        policies=suite_policies(policies),
        nodes=(n,),
        clusters=(cluster,),
        seeds=tuple(seeds),
        workload=setting.workload,
        load=setting.load,
        workflows=fixed,
        arrivals=setting.arrivals,
        residency=setting.world,
    )


def run_setting(
    cfg: StudyConfig,
    *,
    jobs: int | None,
    precision: float,
    max_workflows: int | None,
    say: Say | None = None,
) -> tuple[list[dict[str, Any]], StudyConfig]:
    """The runs of one setting: grown to ``precision`` (``eval.pipeline.run_to_precision``)
    unless the setting fixes its length; the rows and the config that made them."""
    from scalesched.eval.pipeline import run_to_precision

    def study(c: StudyConfig) -> list[dict[str, Any]]:
        return run_study(c, jobs=jobs)

    if cfg.workflows is not None:
        return study(cfg), cfg
    rows, used, _ = run_to_precision(cfg, study, precision, cap=max_workflows, say=say)
    return rows, used


def p99_ratio(rows: Sequence[dict[str, Any]], policy: str, best: str) -> float:
    """Mean over the seeds both ran of ``policy``'s p99 response time over ``best``'s (each
    run's p99 over the shared window): a point estimate."""
    by: dict[str, dict[int, float]] = {policy: {}, best: {}}
    for r in rows:
        if r["policy"] in by and r.get("status") == STATUS_OK and "p99_response_time_s" in r:
            by[r["policy"]][int(r["seed"])] = float(r["p99_response_time_s"])
    seeds = sorted(set(by[policy]) & set(by[best]))
    ratios = [by[policy][s] / by[best][s] for s in seeds if by[best][s] > 0]
    return math.fsum(ratios) / len(ratios) if ratios else math.nan


def setting_result(
    setting: SuiteSetting, cfg: StudyConfig, rows: Sequence[dict[str, Any]], asked: Sequence[str]
) -> dict[str, Any]:
    """One row of the suite's table: the best heuristic and, per policy asked, its ratios.
    A setting whose arrivals follow a recorded shape has no steady state, whatever its runs'
    verdicts say (a trend test over a stretched hour can pass), so it is never steady."""
    summary = summarise(rows, cfg.policies, force=True)
    n = summary["sizes"][0] if summary["sizes"] else cfg.nodes[0]
    block = summary["by_n"].get(n, {"policies": {}, "best_heuristic": None})
    best = block["best_heuristic"]
    out: dict[str, Any] = {
        **dataclasses.asdict(setting),
        "servers": n,
        "workflows": cfg.workflows,
        "seeds": list(cfg.seeds),
        "best_heuristic": best,
        "best_heuristic_mean_rt_s": block["policies"].get(best, {}).get("mean_rt"),
        "best_heuristic_steady": setting.steady_arrivals and _steady(rows, best),
        "world_used": sorted({str(r.get("world", setting.world)) for r in rows}),
        "policies": {},
    }
    for p in asked:
        e = block["policies"].get(p, {})
        if best is None or "paired_ratio_to_best" not in e:
            out["policies"][p] = {"status": e.get("status", "no result")}
            continue
        out["policies"][p] = {
            "mean_ratio": float(e["paired_ratio_to_best"]),
            "mean_ratio_ci": float(e["paired_ratio_to_best_ci"]),
            "p99_ratio": p99_ratio(rows, p, best),
            "mean_rt_s": float(e["mean_rt"]),
            "steady": setting.steady_arrivals and _steady(rows, p),
            **({"note": e["ratio_withheld"]} if "ratio_withheld" in e else {}),
        }
    return out


def _steady(rows: Sequence[dict[str, Any]], policy: str | None) -> bool:
    runs = [r for r in rows if r["policy"] == policy and r.get("status") == STATUS_OK]
    return bool(runs) and all(bool(r.get("steady_state")) for r in runs)


def counted(result: dict[str, Any], policy: str, force: bool) -> bool:
    """Whether a setting's ratio enters the suite's summary: every run behind it steady
    (the policy's and the best heuristic's), unless ``force``."""
    e = result["policies"].get(policy, {})
    if "mean_ratio" not in e:
        return False
    return force or (bool(e["steady"]) and bool(result["best_heuristic_steady"]))


def suite_summary(
    results: Sequence[dict[str, Any]], policies: Sequence[str], force: bool = False
) -> dict[str, Any]:
    """Per policy over the settings that count (:func:`counted`): the mean of each ratio
    and the worst setting of each, and which settings were left out and why."""
    out: dict[str, Any] = {}
    for p in policies:
        kept = [r for r in results if counted(r, p, force)]
        left = [r["name"] for r in results if not counted(r, p, force)]
        entry: dict[str, Any] = {"settings": len(kept), "left_out": left}
        for key in ("mean_ratio", "p99_ratio"):
            values = [(float(r["policies"][p][key]), r["name"]) for r in kept]
            values = [v for v in values if math.isfinite(v[0])]
            if values:
                worst = max(values)
                entry[key] = math.fsum(v for v, _ in values) / len(values)
                entry[f"worst_{key}"], entry[f"worst_{key}_setting"] = worst
        out[p] = entry
    return out


def run_suite(
    suite: Suite,
    settings: Sequence[SuiteSetting],
    policies: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    *,
    jobs: int | None = None,
    precision: float = 0.01,
    max_workflows: int | None = None,
    force: bool = False,
    say: Say | None = None,
) -> dict[str, Any]:
    """Every setting in turn (its runs in parallel), its rows in ``out/<setting>/``; the
    summary (also ``out/robustness.json`` and ``.md``)."""
    from scalesched.eval.robustness_report import suite_markdown, write_summary

    results: list[dict[str, Any]] = []
    for i, s in enumerate(settings, 1):
        tag = f"[{i}/{len(settings)}] {s.name}"
        if say:
            say(f"{tag}: {s.cluster}, {s.workload}, {s.arrivals} at load {s.load}, {s.world}")
        ref = cluster_reference(suite, s, out / "clusters")
        cfg = setting_config(suite, s, policies, seeds, ref, max_workflows)
        rows, used = run_setting(
            cfg, jobs=jobs, precision=precision, max_workflows=max_workflows, say=say
        )
        write_results_csv(rows, _folder(out, s.name) / "results.csv")
        results.append(setting_result(s, used, rows, policies))
        if say:
            say(f"{tag}: {_line(results[-1], policies)}")
    summary = {
        "suite": suite.name,
        "version": suite.version,
        "policies": list(policies),
        "seeds": list(seeds),
        "precision": precision,
        "max_workflows": max_workflows,
        "settings": results,
        "summary": suite_summary(results, policies, force),
    }
    summary["markdown"] = suite_markdown(summary)
    write_summary(summary, out)
    return summary


def _folder(out: Path, name: str) -> Path:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _line(result: dict[str, Any], policies: Sequence[str]) -> str:
    parts = [f"best heuristic {result['best_heuristic']}"]
    for p in policies:
        e = result["policies"][p]
        if "mean_ratio" in e:
            parts.append(
                f"{p} {e['mean_ratio']:.3f} ± {e['mean_ratio_ci']:.3f} (p99 {e['p99_ratio']:.3f})"
                + ("" if e["steady"] else ", not steady")
            )
        else:
            parts.append(f"{p}: {e['status']}")
    return "; ".join(parts)
