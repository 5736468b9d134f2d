"""Extra server time of hedging as a share of all busy server time (docs/tail.md, section 5).

    python research/hedge_share.py --policy hedge --seeds 0,1,2 --load 0.8

The simulator charges a cancelled copy's time from its start to its cancellation
(``extra_server_seconds``: request-seconds in an engine's batch for LLM calls, core-seconds
for tools). The busy server time in the same units is, over the whole run (as the charge
is), every finished LLM call's start-to-end seconds plus every tool's CPU seconds (its
external latency holds nothing), plus the charge itself. Prints one row per seed with the
response-time percentiles, so they can be matched against ``scalesched eval``'s.

For ``hedge`` it also checks the Monte-Carlo model: over the hedged tasks, how often a copy
other than the serial choice finished first, against the mean predicted probability of that
(``HedgeOption.p_switch``), and the predicted gain and extra time per hedge. It reads which
task a decision is about from the simulator (``decision.view`` is the ``Simulation``): a
diagnostic, not something a policy may do.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import numpy as np

from scalesched.decision.actions import Hedge
from scalesched.decision.features import Decision
from scalesched.policies import get_policy
from scalesched.policies.hedge import HedgeOption, HedgeScheduler
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.runs.traces import decided_task
from scalesched.sim.engine import Simulation
from scalesched.sim.run import SimResult
from scalesched.workload.instance import Job


def busy_server_seconds(result: SimResult, jobs: Sequence[Job], core_speed: np.ndarray) -> float:
    """Request-seconds of finished LLM calls plus core-seconds of tools (no hedge copies)."""
    tasks = {(j.workflow_id, t.id): t for j in jobs for t in j.workflow.tasks}
    total = 0.0
    for rec in result.trace:
        if rec.kind == "llm":
            total += rec.end - rec.start
        else:
            total += tasks[(rec.workflow, rec.task)].cpu_work / float(core_speed[rec.server])
    return total


class Recorder(HedgeScheduler):
    """``hedge`` that remembers, per hedged task, its option and its first server."""

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.hedges: dict[tuple[int, str], tuple[HedgeOption, int]] = {}

    def select(self, decision: Decision) -> int | Hedge:
        answer = super().select(decision)
        if isinstance(answer, Hedge) and self.last_hedge is not None:
            assert isinstance(decision.view, Simulation)
            key, _ = decided_task(decision.view)
            self.hedges[key] = (self.last_hedge, answer.servers[0])
        return answer


def calibration(result: SimResult, policy: Recorder) -> dict[str, float]:
    won = {(r.workflow, r.task): r.server for r in result.trace}
    rows = [(o, won[key] != first) for key, (o, first) in policy.hedges.items() if key in won]
    if not rows:
        return {}
    return {
        "switched": float(np.mean([s for _, s in rows])),
        "p_switch_predicted": float(np.mean([o.p_switch for o, _ in rows])),
        "gain_s_predicted": float(np.mean([o.gain_s for o, _ in rows])),
        "extra_s_predicted": float(np.mean([o.extra_s for o, _ in rows])),
        "three_copies": float(np.mean([len(o.servers) == 3 for o, _ in rows])),
    }


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
        policy = Recorder() if args.policy == "hedge" else get_policy(args.policy)
        result = run(setup, policy, record_trace=True)
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
        if isinstance(policy, Recorder):
            row |= calibration(result, policy)
        print(json.dumps(row))


if __name__ == "__main__":
    main()
