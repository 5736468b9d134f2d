"""How well the steady-state verdict and ``--workflows auto`` do what they claim.

Three checks, each printed as one table (docs/steady-state.md, "How the verdict was
checked"):

* ``steady``: long runs at a load the policy sustains, on evaluation seeds: the share the
  verdict calls steady (the claim: at least 95%); ``--residency planned`` runs the planned
  world's settings (on the deployment planned for each run's rate).
* ``falling``: runs whose mean is still falling inside the kept window (short runs on large
  clusters that still pay their first model loads): each run's mean against the long-run
  value of the same setting (a 16,000-workflow run on another seed, steady), and the
  verdict. A run whose mean is above the long-run value by more than its own interval is
  still falling; the claim: every such run is called not steady.
* ``auto``: ``--workflows auto`` on several seeds: the share whose interval covers the
  long-run value (the claim: at least 90%), and the workflows each took; ``--residency
  planned`` in the planned world.

Run from the repository root: ``python research/steady_verdict.py steady`` (or
``falling``, ``auto``; ``--seeds``, ``--out`` for the rows as JSON lines).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from scalesched.runs.length import Attempt, grow
from scalesched.runs.setup import Scenario, prepare, run

KEYS = (
    "avg_response_time_s",
    "avg_response_time_ci_s",
    "warmup_workflows",
    "steady_state",
    "steady_reason",
    "trend_p_value",
    "throughput_wps",
    "offered_rate_wps",
)

STEADY_SETTINGS = (
    ("hetero-16", "tail", 0.7, 6000),
    ("hetero-16", "eft", 0.9, 6000),
    ("hetero-32", "tail", 0.9, 8000),
    ("configs/clusters/a100-lab.yaml", "kv_aware", 0.7, 6000),
)
FALLING_SETTINGS = (
    ("hetero-64", "tail", 0.9, 1500),
    ("hetero-64", "tail", 0.9, 3000),
    ("hetero-128", "tail", 0.9, 3000),
    ("hetero-256", "tail", 0.9, 4000),
    ("hetero-1024", "tail", 0.7, 2000),
)
LONG_RUN = 16_000
AUTO_SETTING = ("hetero-16", "tail", 0.7)
PLANNED_STEADY_SETTINGS = (
    ("hetero-16", "tail", 0.7, 8000),
    ("hetero-32", "eft", 0.7, 16000),
    ("hetero-48", "tail", 0.9, 24000),
    ("configs/clusters/a100-lab.yaml", "kv_aware", 0.7, 8000),
)
"""The planned world's steady settings (``steady --residency planned``): each cluster on the
deployment planned for its load of its planned capacity, long enough that the arrivals
span at least 16 mean responses (``runs.length.MIN_SPAN_RESPONSES``; rates are 12-59
workflows/s here)."""


def one(
    cluster: str, policy: str, load: float, workflows: int, seed: int, world: str = "dynamic"
) -> dict[str, Any]:
    started = time.process_time()
    scenario = Scenario(workflows=workflows, load=load, seed=seed, residency=world)
    setup = prepare(cluster, scenario)
    m = run(setup, policy).metrics
    row = {k: m[k] for k in KEYS}
    row.update(
        cluster=cluster,
        policy=policy,
        load=load,
        workflows=workflows,
        seed=seed,
        world=world,
        cpu_s=round(time.process_time() - started, 1),
    )
    return row


def emit(row: dict[str, Any], out: Path | None) -> None:
    line = json.dumps(row)
    print(line, flush=True)
    if out is not None:
        with out.open("a") as fh:
            fh.write(line + "\n")


def check_steady(seeds: list[int], out: Path | None, world: str = "dynamic") -> None:
    settings = PLANNED_STEADY_SETTINGS if world == "planned" else STEADY_SETTINGS
    rows = []
    for setting in settings:
        for seed in seeds:
            rows.append(one(*setting, seed, world))
            emit(rows[-1], out)
    passed = sum(bool(r["steady_state"]) for r in rows)
    print(f"steady: {passed}/{len(rows)} long steady runs called steady", file=sys.stderr)


def check_falling(seeds: list[int], out: Path | None) -> None:
    caught = falling = 0
    for cluster, policy, load, workflows in FALLING_SETTINGS:
        long_run = one(cluster, policy, load, LONG_RUN, 10_000)
        emit({**long_run, "role": "long-run value"}, out)
        value = float(long_run["avg_response_time_s"])
        for seed in seeds:
            r = one(cluster, policy, load, workflows, seed)
            ci = float(r["avg_response_time_ci_s"])
            still = float(r["avg_response_time_s"]) - value > (ci if ci > 0 else 0.0)
            r.update(role="short", long_run_value=value, still_falling=still)
            emit(r, out)
            falling += still
            caught += still and not r["steady_state"]
    print(
        f"falling: {caught}/{falling} runs with a mean still falling called not steady",
        file=sys.stderr,
    )


def check_auto(
    seeds: list[int], precision: float, out: Path | None, world: str = "dynamic"
) -> None:
    cluster, policy, load = AUTO_SETTING
    values = [
        float(one(cluster, policy, load, LONG_RUN, 10_000 + i, world)["avg_response_time_s"])
        for i in range(3)
    ]
    value = sum(values) / len(values)
    covered = 0
    for seed in seeds:
        last: dict[str, Any] = {}

        def attempt(n: int, seed: int = seed, last: dict[str, Any] = last) -> Attempt:
            r = one(cluster, policy, load, n, seed, world)
            last.update(r)
            ci = float(r["avg_response_time_ci_s"])
            return Attempt(
                n,
                float(r["avg_response_time_s"]),
                ci if ci > 0 else math.inf,
                bool(r["steady_state"]),
            )

        final, tried = grow(attempt, 16, precision)
        hit = abs(final.figure - value) <= final.half_width
        covered += hit
        emit(
            {
                **last,
                "role": "auto",
                "long_run_value": value,
                "covers": hit,
                "tried": [a.workflows for a in tried],
                "precision": precision,
            },
            out,
        )
    print(
        f"auto: {covered}/{len(seeds)} intervals cover the long-run value {value:.3f} s "
        f"(long runs: {', '.join(f'{v:.3f}' for v in values)})",
        file=sys.stderr,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=("steady", "falling", "auto"))
    parser.add_argument("--seeds", default="100-109", help="evaluation seeds, e.g. 100-109")
    parser.add_argument("--precision", type=float, default=0.02)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--residency",
        choices=("dynamic", "planned"),
        default="dynamic",
        help="steady and auto: the world of the runs (steady, planned: its own settings)",
    )
    args = parser.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    if args.check == "steady":
        check_steady(seeds, args.out, args.residency)
    elif args.check == "falling":
        check_falling(seeds, args.out)
    else:
        check_auto(seeds, args.precision, args.out, args.residency)


if __name__ == "__main__":
    main()
