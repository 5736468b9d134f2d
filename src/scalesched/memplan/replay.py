"""Replay: execute a plan operation by operation on five streams and measure it.

This is the ground truth the MILP is checked against.  It does not use the MILP's
coefficient arrays: it writes out the plan's program (every kernel, copy, drive access and
CPU optimizer step, with the tensors each one allocates and frees) and runs it with the
executor's semantics (``plan`` module docstring): in each window every stream runs its
operations back to back from the window's start, and the next window starts when all
streams are done.  Memory is tracked moment by moment: an operation allocates its outputs
when it starts and frees what it consumes when it ends (frees before allocations at equal
times), so the replay's peak can be below the MILP's per-window bound, never above it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from scalesched.memplan.costs import (
    ADAM_BYTES_PER_PARAM,
    ADAM_GPU_BW_EFF,
    STATE_BYTES_PER_PARAM,
    TrainCosts,
)
from scalesched.memplan.plan import (
    DEVICES,
    STREAMS,
    Plan,
    bwd_window,
    fwd_window,
    n_windows,
    offload_target,
    prefetch_lead,
    state_parts,
)


@dataclass(slots=True)
class _Op:
    window: int
    stream: str
    name: str
    layer: int | None
    seconds: float
    allocs: list[tuple[str, str, float]] = field(default_factory=list)
    frees: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TimedOp:
    window: int
    stream: str
    name: str
    layer: int | None
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class ReplayResult:
    iteration_s: float
    tflops: float
    peak_bytes: dict[str, float]
    fits: bool
    window_s: tuple[float, ...]
    ops: tuple[TimedOp, ...]
    memory: dict[str, tuple[tuple[float, float], ...]]
    """Per device, (time, bytes in use) after every change."""


@dataclass(frozen=True, slots=True)
class _Setup:
    """What every step of writing the program reads: the costs, the plan, and the state
    mode split into where the optimizer state lives and its precision's byte counts."""

    c: TrainCosts
    plan: Plan
    where: str
    adam: float
    """Bytes an Adam step moves per parameter."""
    pcie: float
    """PCIe bandwidth, bytes/s."""


def _program(c: TrainCosts, plan: Plan) -> tuple[list[_Op], list[tuple[str, str, float]]]:
    """The plan's operations and the allocations alive from the start (persistent state)."""
    where, prec = state_parts(plan.state)
    s = _Setup(c, plan, where, ADAM_BYTES_PER_PARAM[prec], c.hw.pcie_gbs * 1e9)
    initial = _persistent_state(c, where, STATE_BYTES_PER_PARAM[prec])
    ops: list[_Op] = []
    for i in range(c.layers):
        _forward_ops(s, i, ops)
        _backward_ops(s, i, ops)
        _offload_ops(s, i, ops)
        _optimizer_ops(s, i, ops)
    return ops, initial


def _persistent_state(c: TrainCosts, where: str, opt_bytes: float) -> list[tuple[str, str, float]]:
    """Weights, optimizer state and gradient buffers, where the state mode keeps them (with
    streaming, layer 0's forward weights come loaded by the previous iteration)."""
    total = float(sum(c.params))
    initial: list[tuple[str, str, float]] = []
    if where == "gpu":
        initial.append(("gpu", "weights+state", total * (2.0 + opt_bytes)))
    elif where == "cpu":
        initial.append(("gpu", "weights", total * 2.0))
        initial.append(("cpu", "state+grad buffer", total * (opt_bytes + 2.0)))
    else:
        initial.append(("cpu", "weights+state+grad buffer", total * (2.0 + opt_bytes + 2.0)))
        initial.append(("gpu", "w_f0", 2.0 * c.params[0]))  # loaded by the previous iteration
    return initial


def _forward_ops(s: _Setup, i: int, ops: list[_Op]) -> None:
    """Layer i's forward (after the embedding for layer 0, before the head for the last):
    it keeps its activations, or only a checkpoint when it will be recomputed."""
    c, L = s.c, s.c.layers
    f = fwd_window(i)
    a, ck = c.act_bytes[i], c.ckpt_bytes[i]
    opt = s.plan.choices[i]
    if i == 0:
        ops.append(_Op(f, "compute", "embedding fwd", None, c.emb_fwd_s))
    fwd = _Op(f, "compute", f"fwd L{i}", i, c.fwd_s[i])
    if opt == "recompute":
        fwd.allocs += [("gpu", f"ckpt{i}", ck), ("gpu", f"tmp_f{i}", a - ck)]
        fwd.frees.append(f"tmp_f{i}")
    else:
        fwd.allocs.append(("gpu", f"act{i}", a))
    if s.where == "stream" and i < L - 1:
        fwd.frees.append(f"w_f{i}")
    ops.append(fwd)
    if i == L - 1:
        head = _Op(f, "compute", "lm head fwd", None, c.head_fwd_s)
        head.allocs.append(("gpu", "logits_f", c.head_bytes))
        head.frees.append("logits_f")
        ops.append(head)


def _backward_ops(s: _Setup, i: int, ops: list[_Op]) -> None:
    """Layer i's backward (after the head's for the last layer, the embedding's after
    layer 0), preceded by its recomputation when planned, followed by the fused Adam step
    when the state lives on the GPU."""
    c, L, hw = s.c, s.c.layers, s.c.hw
    b = bwd_window(i, L)
    a, ck, p = c.act_bytes[i], c.ckpt_bytes[i], c.params[i]
    opt = s.plan.choices[i]
    if i == L - 1:
        head = _Op(b, "compute", "lm head bwd", None, c.head_bwd_s)
        head.allocs.append(("gpu", "logits_b", c.head_bytes))
        head.frees.append("logits_b")
        ops.append(head)
    if opt == "recompute":
        ops.append(
            _Op(b, "compute", f"recompute L{i}", i, c.fwd_s[i], [("gpu", f"tmp_b{i}", a - ck)])
        )
    bwd = _Op(b, "compute", f"bwd L{i}", i, c.bwd_s[i])
    bwd.allocs += [("gpu", f"ws{i}", c.ws_bytes[i]), ("gpu", f"grad{i}", 2.0 * p)]
    bwd.frees.append(f"ws{i}")
    bwd.frees += [f"ckpt{i}", f"tmp_b{i}"] if opt == "recompute" else [f"act{i}"]
    if s.where == "stream":
        bwd.frees.append(f"w_f{i}" if i == L - 1 else f"w_b{i}")
    ops.append(bwd)
    if s.where == "gpu":
        secs = p * s.adam / (hw.hbm_gbs * 1e9 * ADAM_GPU_BW_EFF)
        ops.append(_Op(b, "compute", f"adam L{i}", i, secs, frees=[f"grad{i}"]))
    if i == 0:
        ops.append(_Op(b, "compute", "embedding bwd", None, c.emb_bwd_s))


def _offload_ops(s: _Setup, i: int, ops: list[_Op]) -> None:
    """An offloaded layer's activations: out over PCIe the window after its forward, back
    in ahead of its backward, through host memory or through the NVMe drive."""
    c, L, hw = s.c, s.c.layers, s.c.hw
    opt = s.plan.choices[i]
    target = offload_target(opt)
    if target is None:
        return
    f, a, act_key = fwd_window(i), c.act_bytes[i], f"act{i}"
    out_w, in_w = f + 1, bwd_window(i + prefetch_lead(opt), L)
    host = f"{target}_act{i}"
    ops.append(_Op(out_w, "d2h", f"offload L{i}", i, a / s.pcie, frees=[act_key]))
    ops.append(_Op(in_w, "h2d", f"prefetch L{i}", i, a / s.pcie, [("gpu", act_key, a)]))
    if target == "cpu":
        ops[-2].allocs.append(("cpu", host, a))
        ops[-1].frees.append(host)
    else:
        wr = a / (hw.nvme_write_gbs * 1e9)
        rd = a / (hw.nvme_read_gbs * 1e9)
        ops.append(_Op(out_w, "nvme", f"write L{i}", i, wr, [("nvme", host, a)]))
        ops.append(_Op(in_w, "nvme", f"read L{i}", i, rd, frees=[host]))


def _optimizer_ops(s: _Setup, i: int, ops: list[_Op]) -> None:
    """The host optimizer pipeline of layer i (gradients out, CPU Adam, weights back) and,
    when streaming, its weight loads ahead of its forward and its backward."""
    if s.where == "gpu":
        return
    c, L, hw = s.c, s.c.layers, s.c.hw
    f, b, p = fwd_window(i), bwd_window(i, L), c.params[i]
    pcie = s.pcie
    ops.append(_Op(b + 1, "d2h", f"grads L{i}", i, 2.0 * p / pcie, frees=[f"grad{i}"]))
    cpu_s = p * s.adam / (hw.cpu_adam_gbs * 1e9)
    ops.append(_Op(b + 2, "cpu", f"adam L{i}", i, cpu_s))
    if s.where == "cpu":
        ops.append(_Op(b + 3, "h2d", f"weights L{i}", i, 2.0 * p / pcie))
    if s.where == "stream":
        w_s = 2.0 * p / pcie
        if i == 0:  # the next iteration's first layer, in the last tail window
            W = n_windows(L)
            ops.append(_Op(W - 1, "h2d", "load W L0", 0, w_s, [("gpu", "w_next0", 2 * p)]))
        else:
            ops.append(_Op(f - 1, "h2d", f"load W L{i}", i, w_s, [("gpu", f"w_f{i}", 2 * p)]))
        if i < L - 1:
            ops.append(_Op(b - 1, "h2d", f"load W L{i}", i, w_s, [("gpu", f"w_b{i}", 2 * p)]))


def replay(c: TrainCosts, plan: Plan) -> ReplayResult:
    """Run ``plan`` for one steady-state iteration; times in seconds, memory in bytes."""
    ops, initial = _program(c, plan)
    W = n_windows(c.layers)
    by_window: dict[int, list[_Op]] = defaultdict(list)
    for op in ops:
        by_window[op.window].append(op)
    timed: list[TimedOp] = []
    events: list[tuple[float, int, str, float]] = []  # (time, 0 free / 1 alloc, device, delta)
    live: dict[str, tuple[str, float]] = {}
    for dev, key, size in initial:
        live[key] = (dev, size)
        events.append((0.0, 1, dev, size))
    window_s: list[float] = []
    now = 0.0
    for w in range(W):
        ends = {s: now for s in STREAMS}
        for op in by_window.get(w, []):
            start = ends[op.stream]
            end = start + op.seconds
            ends[op.stream] = end
            timed.append(TimedOp(w, op.stream, op.name, op.layer, start, end))
            for dev, key, size in op.allocs:
                live[key] = (dev, size)
                events.append((start, 1, dev, size))
            for key in op.frees:
                dev, size = live.pop(key)
                events.append((end, 0, dev, -size))
        end_w = max(ends.values())
        window_s.append(end_w - now)
        now = end_w
    events.sort(key=lambda e: (e[0], e[1]))
    in_use = dict.fromkeys(DEVICES, 0.0)
    peak = dict.fromkeys(DEVICES, 0.0)
    trace: dict[str, list[tuple[float, float]]] = {d: [(0.0, 0.0)] for d in DEVICES}
    for t, _, dev, delta in events:
        in_use[dev] += delta
        peak[dev] = max(peak[dev], in_use[dev])
        trace[dev].append((t, in_use[dev]))
    caps = {"gpu": c.hw.gpu_mem_bytes, "cpu": c.hw.cpu_mem_bytes, "nvme": c.hw.nvme_bytes}
    return ReplayResult(
        iteration_s=now,
        tflops=c.model_flops / now / 1e12,
        peak_bytes=peak,
        fits=all(peak[d] <= caps[d] * (1 + 1e-9) for d in DEVICES),
        window_s=tuple(window_s),
        ops=tuple(timed),
        memory={d: tuple(v) for d, v in trace.items()},
    )
