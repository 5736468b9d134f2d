"""Plans and their window model: what the MILP, the brute force and the baselines share.

An iteration is a sequence of W = 2L + 3 *windows*: the forward of layers 0..L-1, the
backward of layers L-1..0, then three tail windows that drain the CPU optimizer's pipeline.
In every window five streams work side by side: GPU compute, PCIe host-to-device (H2D),
PCIe device-to-host (D2H), the NVMe drive and the CPU (optimizer).  A window lasts as long
as its busiest stream (each stream runs its work back to back); the next window starts when
all streams are done.  That is how the plan is executed (``replay``): every transfer of a
window is issued when the window starts and all streams synchronise at its end.

A plan picks, per layer, what happens to its activations:

- ``keep``: they stay on the GPU until the layer's backward;
- ``recompute``: only the layer input stays; the backward first reruns the forward;
- ``cpu1``/``cpu2``, ``nvme1``/``nvme2``: offloaded to host memory / the NVMe drive in the
  forward window of the next layer, prefetched back in the backward window 1 or 2 layers
  ahead of use (the plan's choice of transfer window).  NVMe traffic also crosses PCIe.

and one *state* mode for weights, gradients and optimizer state (fp32 or 8-bit moments):

- ``gpu-*``: everything on the GPU; each layer's Adam step runs right after its backward;
- ``cpu-*`` (ZeRO-Offload): 16-bit weights on the GPU, optimizer state on the host; a layer's
  gradients go D2H one window after its backward, the CPU runs its Adam step the window
  after and the new weights go H2D the window after that;
- ``stream-*`` (MegaTrain): everything on the host; a layer's weights are loaded one window
  before its forward and before its backward (the first layer's in the last tail window,
  for the next iteration), gradients and the CPU step as in ``cpu-*``.

Memory is counted per window: a tensor counts in every window during which it exists at
some moment, so a plan within the caps in every window never exceeds them (the replay's
moment-by-moment peak is at most this bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scalesched.errors import InputError, parse_json
from scalesched.memplan.costs import (
    ADAM_BYTES_PER_PARAM,
    ADAM_GPU_BW_EFF,
    STATE_BYTES_PER_PARAM,
    TrainCosts,
)

OPTIONS: tuple[str, ...] = ("keep", "recompute", "cpu1", "cpu2", "nvme1", "nvme2")
STATES: tuple[str, ...] = (
    "gpu-fp32",
    "gpu-8bit",
    "cpu-fp32",
    "cpu-8bit",
    "stream-fp32",
    "stream-8bit",
)
STREAMS: tuple[str, ...] = ("compute", "h2d", "d2h", "nvme", "cpu")
DEVICES: tuple[str, ...] = ("gpu", "cpu", "nvme")
COMPUTE, H2D, D2H, NVME, CPU = range(5)
GPU_MEM, CPU_MEM, NVME_MEM = range(3)


def n_windows(layers: int) -> int:
    return 2 * layers + 3


def fwd_window(i: int) -> int:
    return i


def bwd_window(i: int, layers: int) -> int:
    return 2 * layers - 1 - i


def offload_target(option: str) -> str | None:
    """``cpu`` or ``nvme`` for offload options, None otherwise."""
    return option[:-1] if option[:-1] in ("cpu", "nvme") else None


def prefetch_lead(option: str) -> int:
    return int(option[-1]) if offload_target(option) else 0


def option_valid(i: int, layers: int, option: str) -> bool:
    """Offload needs a later forward window (i < L-1) and a backward window lead layers
    ahead (i + lead <= L-1)."""
    if offload_target(option) is None:
        return option in ("keep", "recompute")
    return i + prefetch_lead(option) <= layers - 1


def state_parts(state: str) -> tuple[str, str]:
    """('gpu'|'cpu'|'stream', 'fp32'|'8bit')."""
    where, prec = state.split("-")
    return where, prec


@dataclass(frozen=True, slots=True)
class Plan:
    state: str
    choices: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise InputError("plan", "state", f"unknown state {self.state!r}; known: {STATES}")
        for i, c in enumerate(self.choices):
            if not option_valid(i, len(self.choices), c):
                raise InputError(
                    "plan", f"choices[{i}]", f"{c!r} is not a valid option for layer {i}"
                )


@dataclass(frozen=True, slots=True)
class Coefficients:
    """The window model as arrays: a plan's loads are sums of these.

    ``time[k, w]`` seconds of stream k in window w; ``mem[d, w]`` bytes on device d.
    ``opt_*`` are indexed [layer, option, ...], ``state_*`` [state, ...]; invalid options
    are masked by ``valid``.
    """

    const_time: np.ndarray
    const_mem: np.ndarray
    opt_time: np.ndarray
    opt_mem: np.ndarray
    state_time: np.ndarray
    state_mem: np.ndarray
    valid: np.ndarray
    caps: np.ndarray


def coefficients(c: TrainCosts) -> Coefficients:
    """Fill the window model for ``c`` (the semantics of the module docstring)."""
    const_time, const_mem = _constant_loads(c)
    opt_time, opt_mem, valid = _option_loads(c)
    state_time, state_mem = _state_loads(c)
    caps = np.array([c.hw.gpu_mem_bytes, c.hw.cpu_mem_bytes, c.hw.nvme_bytes])
    return Coefficients(
        const_time, const_mem, opt_time, opt_mem, state_time, state_mem, valid, caps
    )


def _constant_loads(c: TrainCosts) -> tuple[np.ndarray, np.ndarray]:
    """What every plan runs and holds: each layer's forward, backward and its workspace,
    the embedding, and the LM head with its logits."""
    L = c.layers
    W = n_windows(L)
    const_time = np.zeros((5, W))
    const_mem = np.zeros((3, W))
    for i in range(L):
        f, b = fwd_window(i), bwd_window(i, L)
        const_time[COMPUTE, f] += c.fwd_s[i]
        const_time[COMPUTE, b] += c.bwd_s[i]
        const_mem[GPU_MEM, b] += c.ws_bytes[i]
    const_time[COMPUTE, fwd_window(0)] += c.emb_fwd_s
    const_time[COMPUTE, fwd_window(L - 1)] += c.head_fwd_s
    const_time[COMPUTE, bwd_window(L - 1, L)] += c.head_bwd_s
    const_time[COMPUTE, bwd_window(0, L)] += c.emb_bwd_s
    const_mem[GPU_MEM, fwd_window(L - 1)] += c.head_bytes
    const_mem[GPU_MEM, bwd_window(L - 1, L)] += c.head_bytes
    return const_time, const_mem


def _option_loads(c: TrainCosts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per layer and activation option, the time and memory the option adds; and which
    options a layer may take."""
    L = c.layers
    W = n_windows(L)
    opt_time = np.zeros((L, len(OPTIONS), 5, W))
    opt_mem = np.zeros((L, len(OPTIONS), 3, W))
    valid = np.zeros((L, len(OPTIONS)), dtype=bool)
    for i in range(L):
        for o, opt in enumerate(OPTIONS):
            if not option_valid(i, L, opt):
                continue
            valid[i, o] = True
            _add_option(c, i, opt, opt_time[i, o], opt_mem[i, o])
    return opt_time, opt_mem, valid


def _add_option(c: TrainCosts, i: int, opt: str, t: np.ndarray, m: np.ndarray) -> None:
    """Layer i's activations under ``opt``: kept on the GPU from forward to backward, a
    checkpoint plus a recomputation, or offloaded (PCIe out and back, held on the host or
    on the NVMe drive in between)."""
    L, hw = c.layers, c.hw
    pcie = hw.pcie_gbs * 1e9
    f, b = fwd_window(i), bwd_window(i, L)
    a, ck = c.act_bytes[i], c.ckpt_bytes[i]
    target = offload_target(opt)
    if opt == "keep":
        m[GPU_MEM, f : b + 1] += a
    elif opt == "recompute":
        t[COMPUTE, b] += c.fwd_s[i]
        m[GPU_MEM, f : b + 1] += ck
        m[GPU_MEM, f] += a - ck
        m[GPU_MEM, b] += a - ck
    else:
        out_w, in_w = f + 1, bwd_window(i + prefetch_lead(opt), L)
        m[GPU_MEM, f : out_w + 1] += a
        m[GPU_MEM, in_w : b + 1] += a
        t[D2H, out_w] += a / pcie
        t[H2D, in_w] += a / pcie
        if target == "cpu":
            m[CPU_MEM, out_w : in_w + 1] += a
        else:
            m[NVME_MEM, out_w : in_w + 1] += a
            t[NVME, out_w] += a / (hw.nvme_write_gbs * 1e9)
            t[NVME, in_w] += a / (hw.nvme_read_gbs * 1e9)


def _state_loads(c: TrainCosts) -> tuple[np.ndarray, np.ndarray]:
    """Per state mode, the time and memory of weights, gradients and the optimizer."""
    W = n_windows(c.layers)
    state_time = np.zeros((len(STATES), 5, W))
    state_mem = np.zeros((len(STATES), 3, W))
    for s, state in enumerate(STATES):
        _add_state(c, state, state_time[s], state_mem[s])
    return state_time, state_mem


def _add_state(c: TrainCosts, state: str, t: np.ndarray, m: np.ndarray) -> None:
    """One state mode: its persistent memory, then per layer the gradients and the Adam
    step (fused on the GPU, or a host pipeline: gradients out, CPU Adam, weights back or
    streamed in ahead of each use)."""
    L, hw = c.layers, c.hw
    W = n_windows(L)
    pcie = hw.pcie_gbs * 1e9
    where, prec = state_parts(state)
    total = float(sum(c.params))
    opt_bytes = STATE_BYTES_PER_PARAM[prec]
    adam = ADAM_BYTES_PER_PARAM[prec]
    if where == "gpu":
        m[GPU_MEM, :] += total * (2.0 + opt_bytes)
    elif where == "cpu":
        m[GPU_MEM, :] += total * 2.0
        m[CPU_MEM, :] += total * (opt_bytes + 2.0)
    else:
        m[CPU_MEM, :] += total * (2.0 + opt_bytes + 2.0)
    for i in range(L):
        p = c.params[i]
        f, b = fwd_window(i), bwd_window(i, L)
        if where == "gpu":
            m[GPU_MEM, b] += 2.0 * p  # gradients, consumed by the fused step
            t[COMPUTE, b] += p * adam / (hw.hbm_gbs * 1e9 * ADAM_GPU_BW_EFF)
            continue
        m[GPU_MEM, b : b + 2] += 2.0 * p
        t[D2H, b + 1] += 2.0 * p / pcie
        t[CPU, b + 2] += p * adam / (hw.cpu_adam_gbs * 1e9)
        if where == "cpu":
            t[H2D, b + 3] += 2.0 * p / pcie
            continue
        # stream: weights loaded one window before the forward (wrapping to the last
        # tail window for layer 0) and one window before the backward
        load_f = (f - 1) % W
        t[H2D, load_f] += 2.0 * p / pcie
        m[GPU_MEM, load_f] += 2.0 * p
        if i < L - 1:
            m[GPU_MEM, f] += 2.0 * p
            t[H2D, b - 1] += 2.0 * p / pcie
            m[GPU_MEM, b - 1 : b + 1] += 2.0 * p
        else:  # the last layer's weights stay from its forward to its backward
            m[GPU_MEM, f : b + 1] += 2.0 * p


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A plan under the window model: what the MILP predicts for it."""

    iteration_s: float
    window_s: np.ndarray
    stream_s: np.ndarray
    mem: np.ndarray
    peak_bytes: dict[str, float]
    fits: bool
    tflops: float


def evaluate(c: TrainCosts, plan: Plan, coef: Coefficients | None = None) -> Evaluation:
    coef = coef if coef is not None else coefficients(c)
    if len(plan.choices) != c.layers:
        raise InputError(
            "plan", "choices", f"{len(plan.choices)} choices for a {c.layers}-layer model"
        )
    s = STATES.index(plan.state)
    time = coef.const_time + coef.state_time[s]
    mem = coef.const_mem + coef.state_mem[s]
    for i, opt in enumerate(plan.choices):
        o = OPTIONS.index(opt)
        time = time + coef.opt_time[i, o]
        mem = mem + coef.opt_mem[i, o]
    window_s = time.max(axis=0)
    iteration = float(window_s.sum())
    peaks = mem.max(axis=1)
    fits = bool(np.all(peaks <= coef.caps * (1 + 1e-9)))
    return Evaluation(
        iteration_s=iteration,
        window_s=window_s,
        stream_s=time,
        mem=mem,
        peak_bytes={d: float(peaks[k]) for k, d in enumerate(DEVICES)},
        fits=fits,
        tflops=c.model_flops / iteration / 1e12,
    )


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {"state": plan.state, "choices": list(plan.choices)}


def plan_from_dict(d: Any, source: str) -> Plan:
    if not isinstance(d, dict):
        raise InputError(source, "plan", "must be an object with 'state' and 'choices'")
    state, choices = d.get("state"), d.get("choices")
    if not isinstance(state, str):
        raise InputError(source, "plan.state", "must be a string")
    if not isinstance(choices, list) or not all(isinstance(x, str) for x in choices):
        raise InputError(source, "plan.choices", "must be a list of option names")
    bad = [x for x in choices if x not in OPTIONS]
    if bad:
        raise InputError(source, "plan.choices", f"unknown option {bad[0]!r}; known: {OPTIONS}")
    try:
        return Plan(state, tuple(choices))
    except InputError as exc:
        raise InputError(source, f"plan.{exc.field}", exc.message) from None


def read_json(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError(str(path), "file", "not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), "file", f"cannot read ({type(exc).__name__})") from None
    data = parse_json(text, str(path))  # strict: duplicate keys, NaN literals, depth
    if not isinstance(data, dict):
        raise InputError(str(path), "json", "must be a JSON object")
    return data
