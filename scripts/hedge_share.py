"""Extra server time of hedging as a share of all busy server time (docs/tail.md, section 5).

    python scripts/hedge_share.py --policy hedge --seeds 0,1,2 --load 0.8

The simulator charges a cancelled copy's time from its start to its cancellation
(``extra_server_seconds``: request-seconds in an engine's batch for LLM calls, core-seconds
for tools). The busy server time in the same units is, over the whole run (as the charge
is), every finished LLM call's start-to-end seconds plus every tool's CPU seconds (its
external latency holds nothing), plus the charge itself. Prints one row per seed with the
response-time percentiles, so they can be matched against ``scalesched eval``'s.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from scalesched.eval.setup import Scenario, prepare, run
from scalesched.sim.run import SimResult
from scalesched.workload.instance import Job


def busy_server_seconds(result: SimResult, jobs: list[Job], core_speed: np.ndarray) -> float:
    """Request-seconds of finished LLM calls plus core-seconds of tools (no hedge copies)."""
    tasks = {(j.workflow_id, t.id): t for j in jobs for t in j.workflow.tasks}
    total = 0.0
    for rec in result.trace:
        if rec.kind == "llm":
            total += rec.end - rec.start
        else:
            total += tasks[(rec.workflow, rec.task)].cpu_work / float(core_speed[rec.server])
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policy", default="hedge")
    ap.add_argument("--cluster", default="hetero-16")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--workflows", type=int, default=1500)
    args = ap.parse_args()
    for seed in (int(s) for s in args.seeds.split(",")):
        scenario = Scenario(
            workload=args.workload, workflows=args.workflows, load=args.load, seed=seed
        )
        setup = prepare(args.cluster, scenario)
        result = run(setup, args.policy, record_trace=True)
        m = result.metrics
        extra = float(m["extra_server_seconds"])
        busy = busy_server_seconds(result, setup.jobs, setup.tables.core_speed) + extra
        row = {
            "policy": args.policy,
            "load": args.load,
            "seed": seed,
            "p50": m["p50_response_time_s"],
            "p95": m["p95_response_time_s"],
            "p99": m["p99_response_time_s"],
            "hedged_tasks": m["hedged_tasks"],
            "tasks": m["tasks_completed"],
            "extra_server_seconds": extra,
            "busy_server_seconds": busy,
            "extra_share": extra / busy if busy > 0 else 0.0,
            "steady_state": m["steady_state"],
        }
        print(json.dumps(row))


if __name__ == "__main__":
    main()
