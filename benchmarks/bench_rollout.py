"""Headroom of a one-step rollout over its base: ``rollout_oracle`` (forks on the true future),
``rollout`` (forks on sampled futures) and ``order_rollout`` (the admission order, on sampled
futures; base ``fcfs_workflow`` or ``tail``) against the base (``tail``) on the same seeds,
mean and p99 response time as seed-paired ratios with 95% confidence intervals, and the
decision latency.

    python benchmarks/bench_rollout.py --seeds 0 1 2 --workflows 400 --horizons 20 \
        --policies rollout_oracle rollout --forks 1 --out results/rollout.jsonl

Arms: the base, then per horizon ``oracle-h<H>`` (``--policies rollout_oracle``) and
``rollout-h<H>-f<F>`` (``--policies rollout``, ``--forks`` sampled futures per candidate),
``order-h<H>-f<F>`` (``--policies order_rollout``).
Each run appends one JSON line to ``--out`` as it finishes (a long sweep can be read while
it runs: ``--summarise`` prints the table from the file alone). docs/headroom.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from scalesched.decision.cycle import Watched
from scalesched.policies import get_policy
from scalesched.policies.order_rollout import OrderRolloutScheduler
from scalesched.policies.rollout import RolloutScheduler, SampledRolloutScheduler
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.stats import mean_ci_text, paired_ratios

STATS = ("avg_response_time_s", "p99_response_time_s")


def make_arm(args: argparse.Namespace, policy: str | None, horizon: float) -> tuple[str, Any]:
    """The arm's name and scheduler: the base (``policy`` None), the oracle, ``rollout`` or
    ``order_rollout``."""
    if policy is None:
        return args.base, get_policy(args.base)
    if policy == "order_rollout":
        order = OrderRolloutScheduler(base=args.base, horizon_s=horizon, forks=args.forks)
        return f"order-h{horizon:g}-f{args.forks}", order
    options = dict(
        base=args.base,
        candidates=args.candidates,
        horizon_s=horizon,
        terminal_weight=args.terminal_weight,
    )
    if policy == "rollout_oracle":
        return f"oracle-h{horizon:g}", RolloutScheduler(**options)
    return f"rollout-h{horizon:g}-f{args.forks}", SampledRolloutScheduler(
        forks=args.forks, **options
    )


def one_run(
    args: argparse.Namespace, seed: int, policy_name: str | None, horizon: float
) -> dict[str, Any]:
    """Run the base (``policy_name`` None) or a rollout over it on ``seed``: one row."""
    scenario = Scenario(
        workload=args.workload,
        workflows=args.workflows,
        load=args.load,
        seed=seed,
        residency=args.residency,
    )
    setup = prepare(args.cluster, scenario)
    arm, inner = make_arm(args, policy_name, horizon)
    policy = Watched(inner)
    t0 = time.process_time()
    result = run(setup, policy)
    m = result.metrics
    stats = getattr(inner, "stats", {})
    rolled = int(stats.get("rolled", 0))
    return {
        "arm": arm,
        "seed": seed,
        "workflows": args.workflows,
        "steady": m["steady_state"],
        **{s: float(m[s]) for s in STATS},
        "decisions": int(m["decisions"]),
        "rolled": rolled,
        "changed": int(stats.get("changed", 0)),
        "ms_per_rolled": 1e3 * float(stats.get("fork_s", 0.0)) / max(1, rolled),
        "ms_per_decision": 1e3 * policy.select_s / max(1, int(m["decisions"])),
        "cpu_s": time.process_time() - t0,
    }


def summarise(rows: list[dict[str, Any]], base: str) -> str:
    """A markdown table: per arm, means over seeds and seed-paired ratios to the base."""
    by_arm: dict[str, dict[int, dict[str, Any]]] = {}
    for row in rows:
        by_arm.setdefault(row["arm"], {})[row["seed"]] = row
    ref = by_arm.get(base, {})
    lines = [
        "| arm | seeds | mean (s) | p99 (s) | mean / base | p99 / base | changed / rolled "
        "| ms per rolled decision | ms per decision | steady runs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, runs in by_arm.items():
        seeds = sorted(set(runs) & set(ref)) if arm != base else sorted(runs)
        if not seeds:
            continue
        cells = [arm, str(len(seeds))]
        cells += [f"{sum(runs[k][s] for k in seeds) / len(seeds):.2f}" for s in STATS]
        for s in STATS:
            mine = {k: runs[k][s] for k in seeds}
            cells.append(mean_ci_text(paired_ratios(mine, {k: ref[k][s] for k in seeds})))
        changed = sum(runs[k]["changed"] for k in seeds)
        rolled = sum(runs[k]["rolled"] for k in seeds)
        cells.append(f"{changed} / {rolled}")
        cells.append(f"{sum(runs[k]['ms_per_rolled'] for k in seeds) / len(seeds):.0f}")
        cells.append(f"{sum(runs[k]['ms_per_decision'] for k in seeds) / len(seeds):.1f}")
        cells.append(f"{sum(bool(runs[k]['steady']) for k in seeds)} / {len(seeds)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", default="hetero-16")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--load", type=float, default=0.9, help="fraction of measured capacity")
    ap.add_argument("--workflows", type=int, default=400)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--horizons", type=float, nargs="+", default=[20.0])
    ap.add_argument("--base", default="tail")
    ap.add_argument("--candidates", type=int, default=3)
    ap.add_argument("--terminal-weight", type=float, default=0.0)
    ap.add_argument(
        "--policies",
        nargs="+",
        choices=("rollout_oracle", "rollout", "order_rollout"),
        default=["rollout_oracle"],
        help="lookaheads run beside the base: on the true future, on sampled futures, the "
        "admission order on sampled futures",
    )
    ap.add_argument(
        "--residency",
        choices=("dynamic", "planned"),
        default="dynamic",
        help="the world: models loaded on demand, or a deployment planned for the rate",
    )
    ap.add_argument("--forks", type=int, default=1, help="rollout: sampled futures per candidate")
    ap.add_argument("--out", type=Path, default=Path("results/rollout.jsonl"))
    ap.add_argument("--summarise", action="store_true", help="print the table from --out only")
    args = ap.parse_args()
    if not args.summarise:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        arms = [(None, 0.0)] + [(p, h) for h in args.horizons for p in args.policies]
        for seed in args.seeds:
            for policy_name, horizon in arms:
                row = one_run(args, seed, policy_name, horizon)
                print(json.dumps(row), flush=True)
                with args.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    print(summarise(rows, args.base))


if __name__ == "__main__":
    main()
