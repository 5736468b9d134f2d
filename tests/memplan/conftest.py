"""Small instances for the memory planner's tests: real cost-model layers, cut short, with
memory caps that bind, and uneven (seeded) variants."""

from __future__ import annotations

import random
from dataclasses import replace

from scalesched.memplan.costs import TrainCosts, train_costs
from scalesched.memplan.plan import Plan, coefficients, evaluate


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
    """``layers`` layers of llama-2-7b; the GPU cap is ``gpu_frac`` of the way from the
    leanest plan's peak (streaming, all recompute) to the all-keep GPU plan's peak, so
    memory binds; the host cap likewise between the leanest and the all-CPU-offload plan.
    With ``seed``, every layer's times and sizes get independent factors in [0.5, 1.5];
    ``nvme_gbs`` sets both NVMe bandwidths (a striped array)."""
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
    offl = ["cpu1" if i < layers - 1 else "keep" for i in range(layers)]
    host = evaluate(c, Plan("cpu-fp32", tuple(offl))).peak_bytes
    gpu_cap = lean["gpu"] + gpu_frac * (fat["gpu"] - lean["gpu"])
    cpu_cap = lean["cpu"] + cpu_frac * (host["cpu"] - lean["cpu"])
    hw = replace(c.hw, gpu_mem_bytes=gpu_cap, cpu_mem_bytes=max(cpu_cap, 1.0))
    if nvme_gbs is not None:
        hw = replace(hw, nvme_read_gbs=nvme_gbs, nvme_write_gbs=nvme_gbs)
    out = replace(c, hw=hw)
    coefficients(out)  # fail early on a broken instance
    return out
