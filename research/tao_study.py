"""The ``tao`` measurement (docs/cache.md, "`tao`: joint admission and placement"): tao and
the heuristics on the same runs, per preset, load, seed and KV policy, with seed-paired
95% intervals of tao / the best heuristic.

    nice -n 10 python research/tao_study.py --presets tool-heavy:0.8,agentic-mix:0.7 \\
        --seeds 5 --workflows 1430 --kv lru,agent-aware --out results/tao_study

1430 workflows leave 1001 measured (20% warm-up and 10% cool-down excluded, as ``eval``
does). The best heuristic of a (preset, load, KV policy) is the one of ``--heuristics``
with the lowest mean response averaged over the seeds; tao's ratios to it are paired by
seed (Student-t half-widths, ``scalesched.stats``). Besides the engine's TTFT
(landing to the end of prefill) each run reports ``llm_admit_wait``: ready to admission
of the LLM calls, from the trace, which counts the time a deferred call spends in the
deferred queue (TTFT does not: a deferred call has not landed). Writes rows.csv and
prints the tables.

``--bounds`` runs no policy: per preset and seed it prints the mean, over the measured
workflows, of the contention-free lower bound (``decision.records.lower_bound``: every task
alone on its fastest server) and of the same bound with every prefill free (what no
placement or cache can beat: a call's cached prefix at best skips its whole prefill).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from kv_study import write_rows  # a sibling: one CSV layout for the cache studies

from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.kernel.records import lower_bound
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.runs.windows import default_cooldown, default_warmup
from scalesched.stats import mean_ci_text, mean_sd
from scalesched.workload.instance import Job

HEURISTICS = "eft,least_loaded,kv_aware,p2c,cache_aware,soft_eft"
RATIO_KEYS = ("avg_response_time_s", "p95_response_time_s", "ttft_mean_s", "ttft_p95_s")
SHOWN = (
    ("avg_response_time_s", "mean response s"),
    ("p95_response_time_s", "p95 response s"),
    ("ttft_mean_s", "TTFT mean s"),
    ("ttft_p95_s", "TTFT p95 s"),
    ("llm_admit_wait_p95_s", "ready->admitted p95 s"),
    ("prefix_hit_rate", "prefix hit"),
    ("reentry_moved_rate", "re-entry moved"),
    ("deferrals", "deferrals"),
)


def admit_waits(trace: list[Any], first: int, last: int) -> dict[str, float]:
    """Ready-to-admission seconds of the measured workflows' LLM calls (mean, p95)."""
    waits = np.array(
        [r.start - r.ready for r in trace if r.kind == "llm" and first <= r.workflow <= last]
    )
    if waits.size == 0:
        return {"llm_admit_wait_mean_s": 0.0, "llm_admit_wait_p95_s": 0.0}
    return {
        "llm_admit_wait_mean_s": float(waits.mean()),
        "llm_admit_wait_p95_s": float(np.percentile(waits, 95)),
    }


def prefill_free_bound(tables: ClusterTables, job: Job) -> float:
    """``lower_bound`` with every LLM call's prefill free: decode alone, on its fastest
    engine class."""
    wf = job.workflow
    finish = [0.0] * len(wf.tasks)
    for i, task in enumerate(wf.tasks):
        if task.kind == "llm" and task.model:
            out = max(1, task.output_tokens)
            ctx = task.prompt_tokens + out // 2
            cost = min(
                out * (lin1 + attn * ctx)
                for _, _, _, lin1, attn in tables.model_classes[MODEL_INDEX[task.model]]
            )
        else:
            cost = task.cpu_work / tables.max_core_speed + task.ext_latency
        finish[i] = max((finish[p] for p in wf.parents[i]), default=0.0) + cost
    return max(finish, default=0.0)


def bounds(args: argparse.Namespace) -> None:
    """Mean lower bounds of the measured workflows per preset and seed (no policy run)."""
    n = args.workflows
    first, last = default_warmup(n), n - default_cooldown(n) - 1
    print("| preset | load | seed | lower bound s | prefill-free bound s |")
    print("|---|---|---|---|---|")
    for preset_load in args.presets.split(","):
        preset, load = preset_load.split(":")
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            scenario = Scenario(workload=preset, workflows=n, load=float(load), seed=seed)
            setup = prepare(args.cluster, scenario, stream=False)
            jobs = list(setup.jobs)[first : last + 1]
            lb = statistics.fmean(lower_bound(setup.tables, j) for j in jobs)
            free = statistics.fmean(prefill_free_bound(setup.tables, j) for j in jobs)
            print(f"| {preset} | {load} | {seed} | {lb:.3f} | {free:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", default="hetero-16")
    parser.add_argument("--presets", default="tool-heavy:0.8,agentic-mix:0.7")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--workflows", type=int, default=1430)
    parser.add_argument("--heuristics", default=HEURISTICS)
    parser.add_argument("--kv", default="lru")
    parser.add_argument("--out", type=Path, default=Path("results/tao_study"))
    parser.add_argument("--bounds", action="store_true", help="print the lower bounds only")
    args = parser.parse_args()
    if args.bounds:
        bounds(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    policies = ["tao", *args.heuristics.split(",")]
    rows: list[dict[str, Any]] = []
    n = args.workflows
    first, last = default_warmup(n), n - default_cooldown(n) - 1
    for preset_load in args.presets.split(","):
        preset, load = preset_load.split(":")
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            setup = prepare(
                args.cluster, Scenario(workload=preset, workflows=n, load=float(load), seed=seed)
            )
            for kv in args.kv.split(","):
                for policy in policies:
                    result = run(setup, get_policy(policy), kv_policy=kv, record_trace=True)
                    m = result.metrics
                    row = {"preset": preset, "load": float(load), "seed": seed, "kv": kv}
                    row |= {k: v for k, v in m.items()} | admit_waits(result.trace, first, last)
                    rows.append(row)
                    print(
                        f"{preset} {load} seed {seed} {kv} {policy:>12}: mean "
                        f"{m['avg_response_time_s']:.2f} s, TTFT p95 {m['ttft_p95_s']:.3f} s, "
                        f"measured {m['measured_workflows']}, steady {m['steady_state']}",
                        flush=True,
                    )
    write_rows(args.out / "rows.csv", rows)
    print(tables(rows, args.heuristics.split(",")))


def _ms(values: list[float]) -> str:
    mean, sd = mean_sd(values)
    return f"{mean:.3g} ± {sd:.2g}"


def tables(rows: list[dict[str, Any]], heuristics: list[str]) -> str:
    """Per (preset, load, kv): means ± sd over seeds per policy, then tao / best paired."""
    out: list[str] = []
    cells = sorted({(r["preset"], r["load"], r["kv"]) for r in rows})
    for preset, load, kv in cells:
        here = [r for r in rows if (r["preset"], r["load"], r["kv"]) == (preset, load, kv)]
        by = {(r["policy"], r["seed"]): r for r in here}
        seeds = sorted({r["seed"] for r in here})
        names = list(dict.fromkeys(r["policy"] for r in here))
        out.append(f"\n{preset} at load {load}, kv {kv}, seeds {seeds[0]}-{seeds[-1]}:\n")
        out.append("| policy | " + " | ".join(label for _, label in SHOWN) + " |")
        out.append("|---|" + "---|" * len(SHOWN))
        means: dict[str, float] = {}
        for name in names:
            rs = [by[(name, s)] for s in seeds if (name, s) in by]
            means[name] = statistics.fmean(float(r["avg_response_time_s"]) for r in rs)
            shown = [_ms([float(r[k]) for r in rs]) for k, _ in SHOWN]
            out.append(f"| {name} | " + " | ".join(shown) + " |")
        best = min((h for h in heuristics if h in means), key=means.__getitem__)
        out.append(f"\nBest heuristic by mean response: {best}. tao / {best}, paired by seed:\n")
        out.append("| ratio | " + " | ".join(RATIO_KEYS) + " |")
        out.append("|---|" + "---|" * len(RATIO_KEYS))
        for other in dict.fromkeys([best, *[h for h in heuristics if h in means]]):
            ratios = []
            for key in RATIO_KEYS:
                x = np.array(
                    [float(by[("tao", s)][key]) / float(by[(other, s)][key]) for s in seeds]
                )
                ratios.append(mean_ci_text(x))
            out.append(f"| tao / {other} | " + " | ".join(ratios) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
