"""PPO training throughput (environment steps/s) with short cold-start and long steady-state
episodes, on one core.

    taskset -c 1 python benchmarks/bench_train.py [--steps 16384] [--residency dynamic] [--json]

For each episode setting it measures (a) the environment alone, stepped by eft's choice so
no network runs (resets and warm-ups included), and (b) full PPO training (rollouts with
the network acting, GAE, 4 epochs of minibatch updates, per-term gradient norms; no
validation). Both are reported per wall second and per CPU second of the process: on a
shared machine the CPU-time figure is the steadier one. The settings: ``cold-30``, the
original 30-workflow episodes drained to the end; ``cold-300``, the same drained after 300
workflows; ``steady-100``, the steady-state episodes of
``configs/train/scale-steady-n16.yaml`` (eft warms up 50-300 workflows, the policy acts
while 100 more arrive, then truncation). ``--residency planned`` runs each episode on the
deployment planned for its load (docs/worlds.md); the default, dynamic, is the world the
figures in docs/benchmarks.md were measured in.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import torch

from scalesched.env import EnvConfig, SchedulingEnv
from scalesched.train.ppo import Trainer, load_config

STEADY = dict(
    workflows=100,
    load_min=0.4,
    load_max=0.95,
    warmup_min=50,
    warmup_max=300,
    truncate=True,
    reward_scale=0.01,
)
SETTINGS: dict[str, dict[str, Any]] = {
    "cold-30": dict(workflows=30),
    "cold-300": dict(workflows=300),
    "steady-100": STEADY,
}


def env_only(settings: dict[str, Any], steps: int, seed: int) -> dict[str, float]:
    """Steps/s of the environment with eft choosing, and the mean steps per episode."""
    env = SchedulingEnv(EnvConfig(cluster="hetero-16", **settings))
    plans = set()
    env.reset(seed=seed)
    episodes, reset_s = 0, 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        d = env.decision
        assert d is not None
        _, _, terminated, truncated, _ = env.step(
            int(np.argmin(np.where(d.mask, d.finish_s, np.inf)))
        )
        if terminated or truncated:
            episodes += 1
            r0 = time.process_time()
            _, info = env.reset()
            reset_s += time.process_time() - r0
            plans.add(info["deployment"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "env_steps_per_s": steps / wall,
        "env_steps_per_cpu_s": steps / cpu,
        "steps_per_episode": steps / max(episodes, 1),
        "reset_share": reset_s / cpu,
        "plans": len(plans - {""}),
    }


def ppo(settings: dict[str, Any], steps: int, seed: int) -> tuple[float, float]:
    """PPO steps per wall second and per CPU second of this process."""
    cfg = load_config(
        None,
        seed=seed,
        total_steps=steps,
        validate_every=0,
        validation_sizes=[],
        checkpoint_every=10**9,
        **settings,
    )
    with TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        state = Trainer(cfg, Path(tmp)).train()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return state.global_step / wall, state.global_step / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16384, help="PPO steps per setting")
    parser.add_argument("--env-steps", type=int, default=20000, help="env-only steps per setting")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--residency", choices=("dynamic", "planned"), default="dynamic")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in args.settings.split(","):
        settings = {**SETTINGS[name], "residency": args.residency}
        row: dict[str, Any] = {"setting": name, **env_only(settings, args.env_steps, args.seed)}
        row["ppo_steps_per_s"], row["ppo_steps_per_cpu_s"] = ppo(settings, args.steps, args.seed)
        rows.append(row)
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "torch": torch.__version__, "rows": rows}))
        return
    print(
        f"{os.cpu_count()} cores, torch {torch.__version__}, 1 thread, hetero-16, "
        f"{args.residency} world"
    )
    print(
        "| episodes | steps/episode | env only, eft acting: steps/s (per CPU s) "
        "| reset + warm-up share | PPO training: steps/s (per CPU s) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['setting']} | {r['steps_per_episode']:,.0f} "
            f"| {r['env_steps_per_s']:,.0f} ({r['env_steps_per_cpu_s']:,.0f}) "
            f"| {r['reset_share']:.0%} "
            f"| {r['ppo_steps_per_s']:,.0f} ({r['ppo_steps_per_cpu_s']:,.0f}) |"
        )


if __name__ == "__main__":
    main()
