"""CPU time of a rollout run against another checkout's, paired: the same ``rollout_oracle``
run (hetero-16, agentic-mix, load 0.9 by default) in a fresh process with this checkout's
package and with ``--against``'s (a folder holding another ``scalesched`` package, e.g. a
worktree's ``src``), alternated ``--pairs`` times. The two must agree on every response
time figure: a speed-up that changes an answer is a bug, and the script says so.

    git worktree add /tmp/before HEAD~1
    python benchmarks/bench_rollout_cpu.py --against /tmp/before/src --pairs 3

Each side runs in its own process (``PYTHONPATH`` selects the package), so no renaming of
imports is needed; the ratio is of CPU seconds of the run alone, not of start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, time
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, prepare, run
cluster, workload, load, workflows, seed, policy = sys.argv[1:7]
setup = prepare(cluster, Scenario(workload=workload, workflows=int(workflows),
                load=float(load), seed=int(seed)), stream=False)
start = time.process_time()
metrics = run(setup, get_policy(policy)).metrics
cpu = time.process_time() - start
figures = {k: v for k, v in metrics.items() if k.endswith("response_time_s")}
print(json.dumps({"cpu_s": cpu, "figures": figures}))
"""

HERE = Path(__file__).resolve().parents[1] / "src"


def one_run(package_dir: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(package_dir), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", CHILD, args.cluster, args.workload, str(args.load)]
    cmd += [str(args.workflows), str(args.seed), args.policy]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, required=True, help="folder with the other package")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--cluster", default="hetero-16")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--workflows", type=int, default=60)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--policy", default="rollout_oracle")
    args = ap.parse_args()
    sides = {"after": HERE, "before": args.against}
    cpu: dict[str, list[float]] = {"after": [], "before": []}
    figures: dict[str, dict] = {}
    for i in range(args.pairs):
        for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
            out = one_run(sides[name], args)
            cpu[name].append(out["cpu_s"])
            figures[name] = out["figures"]
    if figures["after"] != figures["before"]:
        print(f"the two checkouts disagree: {figures}", file=sys.stderr)
        return 1
    ratios = [a / b for a, b in zip(cpu["after"], cpu["before"], strict=True)]
    print(
        f"{args.policy}, {args.cluster}, {args.workload}, load {args.load}, "
        f"{args.workflows} workflows, seed {args.seed}: figures identical; CPU s before "
        f"{', '.join(f'{t:.2f}' for t in cpu['before'])}; after "
        f"{', '.join(f'{t:.2f}' for t in cpu['after'])}; paired ratio after/before median "
        f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
