"""The study of docs/memplan.md: every strategy across models x GPUs, the MILP against brute
force on small L, and solver time against L.

Run: ``python -m scalesched.memplan.study --out results/memplan`` (writes ``study.json``
and ``study.md``, the tables the doc quotes).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from scalesched.memplan import milp
from scalesched.memplan.baselines import BASELINES, baseline_plan
from scalesched.memplan.brute import brute_force
from scalesched.memplan.costs import TrainCosts, hardware, train_costs
from scalesched.memplan.plan import Plan, coefficients, evaluate
from scalesched.memplan.planner import STRATEGIES, max_batch, plan_strategy

MODELS = ("phi-2", "llama-2-7b", "codellama-34b", "llama-2-70b")
GPUS = ("L4-24G", "A40-48G", "L40S-48G", "A100-80G", "H100-80G")
BATCH, SEQ = 8, 2048
FP32_STATES = ("gpu-fp32", "cpu-fp32", "stream-fp32")
HOST_GB = {"llama-2-70b": 2048.0}
"""Host memory per model where the default (1024 GB) cannot hold fp32 optimizer state
(70B: 16 B/param = 1.1 TB for the streaming baseline)."""


def small_instance(
    layers: int,
    *,
    gpu: str = "L4-24G",
    batch: int = 4,
    gpu_frac: float = 0.5,
    cpu_frac: float = 1.0,
    seed: int | None = None,
    nvme_gbs: float | None = None,
) -> TrainCosts:
    """``layers`` layers of llama-2-7b at ``batch`` x 1024 with memory caps that bind.

    The GPU cap is ``gpu_frac`` of the way from the leanest plan's GPU peak (streaming, all
    recompute) to the all-keep GPU plan's; the host cap likewise between the leanest plan's
    and an all-offload ZeRO-Offload plan's.  With ``seed``, every layer's times, activation
    size and parameters get independent factors in [0.5, 1.5]; ``nvme_gbs`` sets both NVMe
    bandwidths (a striped array).
    """
    c = train_costs("llama-2-7b", gpu, batch, 1024).truncated(layers)
    if seed is not None:
        rng = random.Random(seed)

        def jitter(xs: tuple[float, ...]) -> tuple[float, ...]:
            return tuple(x * rng.uniform(0.5, 1.5) for x in xs)

        c = replace(
            c,
            fwd_s=jitter(c.fwd_s),
            bwd_s=jitter(c.bwd_s),
            act_bytes=jitter(c.act_bytes),
            params=jitter(c.params),
        )
    lean = evaluate(c, Plan("stream-8bit", ("recompute",) * layers)).peak_bytes
    fat = evaluate(c, Plan("gpu-fp32", ("keep",) * layers)).peak_bytes
    offload = tuple("cpu1" if i < layers - 1 else "keep" for i in range(layers))
    host = evaluate(c, Plan("cpu-fp32", offload)).peak_bytes
    gpu_cap = lean["gpu"] + gpu_frac * (fat["gpu"] - lean["gpu"])
    cpu_cap = lean["cpu"] + cpu_frac * (host["cpu"] - lean["cpu"])
    hw = replace(c.hw, gpu_mem_bytes=gpu_cap, cpu_mem_bytes=max(cpu_cap, 1.0))
    if nvme_gbs is not None:
        hw = replace(hw, nvme_read_gbs=nvme_gbs, nvme_write_gbs=nvme_gbs)
    return replace(c, hw=hw)


def grid(
    time_limit_s: float, *, cpu_adam_gbs: float | None = None, with_max_batch: bool = True
) -> list[dict[str, Any]]:
    """TFLOPS at BATCH x SEQ and the max batch at SEQ, per model, GPU and strategy."""
    rows = []
    for model in MODELS:
        for gpu in GPUS:
            hw = hardware(gpu, cpu_mem_gb=HOST_GB.get(model), cpu_adam_gbs=cpu_adam_gbs)
            c = train_costs(model, gpu, BATCH, SEQ, hw)
            coef = coefficients(c)
            keep = min(
                (
                    evaluate(c, Plan(s, ("keep",) * c.layers), coef)
                    for s in ("gpu-fp32", "gpu-8bit")
                ),
                key=lambda e: e.peak_bytes["gpu"],
            )
            row: dict[str, Any] = {
                "model": model,
                "gpu": gpu,
                "host_gb": hw.cpu_mem_bytes / 1e9,
                "memory_binds": not keep.fits,
            }
            for strategy in STRATEGIES:
                res = plan_strategy(c, strategy, time_limit_s=time_limit_s, coef=coef)
                rep = res.replayed
                row[strategy] = {
                    "tflops": rep.tflops if rep is not None and res.fits else None,
                    "iteration_s": rep.iteration_s if rep is not None and res.fits else None,
                    "max_batch": (
                        max_batch(model, hw, SEQ, strategy, time_limit_s=time_limit_s)
                        if with_max_batch
                        else None
                    ),
                    "solver_time_s": res.solver_time_s,
                    "gap": res.gap,
                    "state": res.plan.state if res.plan is not None else None,
                }
                if strategy == "milp" and res.plan is not None and rep is not None:
                    row[strategy]["replay_vs_prediction"] = (
                        rep.iteration_s - res.predicted_s
                    ) / res.predicted_s
                    # the busiest stream's total work bounds ANY executor from below, so
                    # this is the most the window barriers can cost the plan
                    busy = max(
                        sum(op.end - op.start for op in rep.ops if op.stream == k)
                        for k in ("compute", "h2d", "d2h", "nvme", "cpu")
                    )
                    row[strategy]["barrier_overhead_max"] = rep.iteration_s / busy - 1.0
                    row[strategy]["layers"] = {
                        k: res.plan.choices.count(k) for k in sorted(set(res.plan.choices))
                    }
            # ablation: the MILP without 8-bit optimizer state (how much the plan alone gives)
            fp32 = milp.solve(c, time_limit_s=time_limit_s, states=FP32_STATES, coef=coef)
            row["milp_fp32_tflops"] = (
                c.model_flops / fp32.objective_s / 1e12 if fp32.plan is not None else None
            )
            # ... against the baselines held to fp32 state too
            fp32_base = []
            for name in BASELINES:
                plan = baseline_plan(name, c, coef)
                plan = Plan(plan.state.replace("8bit", "fp32"), plan.choices)
                ev = evaluate(c, plan, coef)
                if ev.fits:
                    fp32_base.append(ev.tflops)
            row["best_fp32_baseline_tflops"] = max(fp32_base) if fp32_base else None
            rows.append(row)
            print(model, gpu, {s: row[s]["tflops"] for s in STRATEGIES}, flush=True)
    return rows


EXACT_CASES = (
    # layers, GPU, gpu_frac, cpu_frac, seed, NVMe GB/s
    (4, "L4-24G", 0.2, 0.5, 1, None),
    (5, "H100-80G", 0.3, 1.0, 2, None),
    (6, "L4-24G", 0.05, 0.0, 3, 40.0),
    (6, "A100-80G", 0.3, 0.2, 4, None),
    (7, "L4-24G", 0.15, 0.3, 5, None),
    (7, "A40-48G", 0.08, 0.0, 6, 40.0),
    (8, "L4-24G", 0.3, 0.3, 7, None),
    (8, "H100-80G", 0.2, 1.0, 8, None),
    (8, "A40-48G", 0.06, 0.0, 9, 60.0),
)


def exactness() -> list[dict[str, Any]]:
    """MILP vs brute force (all state modes) on uneven small instances whose memory binds."""
    out = []
    for layers, gpu, gpu_frac, cpu_frac, seed, nvme in EXACT_CASES:
        c = small_instance(
            layers, gpu=gpu, gpu_frac=gpu_frac, cpu_frac=cpu_frac, seed=seed, nvme_gbs=nvme
        )
        t0 = time.perf_counter()
        bf = brute_force(c)
        t_bf = time.perf_counter() - t0
        res = milp.solve(c)
        out.append(
            {
                "layers": layers,
                "gpu": gpu,
                "seed": seed,
                "plans": bf.plans_checked,
                "brute_s": bf.iteration_s,
                "milp_s": res.objective_s,
                "equal": abs(bf.iteration_s - res.objective_s) <= 1e-6 * bf.iteration_s,
                "brute_time_s": t_bf,
                "milp_time_s": res.solver_time_s,
                "plan": f"{res.plan.state}: {' '.join(res.plan.choices)}" if res.plan else "-",
            }
        )
    return out


def scaling(time_limit_s: float) -> list[dict[str, Any]]:
    """Solver time against L: llama-2-70b layers on one L4 and one H100 (batch 8 x 2048)."""
    out = []
    for gpu in ("L4-24G", "H100-80G"):
        full = train_costs("llama-2-70b", gpu, BATCH, SEQ, hardware(gpu, cpu_mem_gb=2048.0))
        for layers in (4, 8, 16, 32, 48, 64, 80):
            c = full.truncated(layers)
            res = milp.solve(c, time_limit_s=time_limit_s)
            out.append(
                {
                    "gpu": gpu,
                    "layers": layers,
                    "solver_time_s": res.solver_time_s,
                    "status": res.status,
                    "gap": res.gap,
                }
            )
    return out


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "OOM" if x is None else format(x, spec)


def markdown(
    rows: list[dict[str, Any]], exact: list[dict[str, Any]], scal: list[dict[str, Any]]
) -> str:
    lines = [f"### TFLOPS at batch {BATCH} x {SEQ} (max batch at seq {SEQ} in brackets)", ""]
    lines.append(
        "| model | GPU | binds | "
        + " | ".join(STRATEGIES)
        + " | MILP / best baseline | MILP fp32 only | best fp32 baseline | ratio (fp32) |"
    )
    lines.append("|---|---|---|" + "---|" * len(STRATEGIES) + "---|---|---|---|")
    for r in rows:
        cells = [
            f"{_fmt(r[s]['tflops'])} [{'-' if r[s]['max_batch'] is None else r[s]['max_batch']}]"
            for s in STRATEGIES
        ]
        base = [r[s]["tflops"] for s in BASELINES if r[s]["tflops"] is not None]
        ratio = (
            f"{r['milp']['tflops'] / max(base):.2f}x"
            if base and r["milp"]["tflops"] is not None
            else ("no baseline fits" if r["milp"]["tflops"] is not None else "-")
        )
        binds = "yes" if r["memory_binds"] else "no"
        f32, b32 = r["milp_fp32_tflops"], r["best_fp32_baseline_tflops"]
        f32_ratio = f"{f32 / b32:.2f}x" if b32 is not None and f32 is not None else "-"
        lines.append(
            f"| {r['model']} | {r['gpu']} | {binds} | "
            + " | ".join(cells)
            + f" | {ratio} | {_fmt(f32)} | {_fmt(b32)} | {f32_ratio} |"
        )
    lines += [
        "",
        "### MILP plans",
        "",
        "| model | GPU | state | layers | solver s | gap | replay vs MILP | barriers cost <= |",
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["milp"]
        if m["state"] is None:
            lines.append(f"| {r['model']} | {r['gpu']} | no plan fits | | | | | |")
            continue
        lay = ", ".join(f"{k} {v}" for k, v in m["layers"].items())
        lines.append(
            f"| {r['model']} | {r['gpu']} | {m['state']} | {lay} | {m['solver_time_s']:.2f} | "
            f"{m['gap']:.1e} | {m['replay_vs_prediction']:+.1e} "
            f"| {m['barrier_overhead_max']:.1%} |"
        )
    lines += ["", "### MILP vs brute force", ""]
    lines.append(
        "| L | GPU | seed | plans enumerated | brute force (s/iter) | MILP (s/iter) | equal "
        "| brute time s | MILP time s | MILP plan |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for e in exact:
        lines.append(
            f"| {e['layers']} | {e['gpu']} | {e['seed']} | {e['plans']} | {e['brute_s']:.6f} "
            f"| {e['milp_s']:.6f} | {'yes' if e['equal'] else 'NO'} | {e['brute_time_s']:.2f} "
            f"| {e['milp_time_s']:.3f} | {e['plan']} |"
        )
    lines += ["", "### Solver time against L (llama-2-70b layers, batch 8 x 2048)", ""]
    lines.append("| GPU | L | solver time s | status | gap |")
    lines.append("|---|---|---|---|---|")
    for s in scal:
        lines.append(
            f"| {s['gpu']} | {s['layers']} | {s['solver_time_s']:.2f} | {s['status']} "
            f"| {s['gap']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/memplan"))
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--cpu-adam-gbs", type=float, default=None, help="override the default")
    ap.add_argument("--grid-only", action="store_true", help="no max batch, brute force, L")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = grid(args.time_limit, cpu_adam_gbs=args.cpu_adam_gbs, with_max_batch=not args.grid_only)
    exact = [] if args.grid_only else exactness()
    scal = [] if args.grid_only else scaling(args.time_limit)
    (args.out / "study.json").write_text(
        json.dumps({"grid": rows, "exactness": exact, "scaling": scal}, indent=1)
    )
    (args.out / "study.md").write_text(markdown(rows, exact, scal))
    print(f"wrote {args.out}/study.md")


if __name__ == "__main__":
    main()
