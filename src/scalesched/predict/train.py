"""Fit a quantile predictor on simulator samples: small torch MLPs with pinball loss.

Why a torch network and not LightGBM's quantile objective: torch is already a core
dependency (LightGBM would be a new compiled one); one network predicts every quantile at
once with monotone outputs (LightGBM fits one model per level, and its quantiles can
cross); and a two-layer MLP exports to a few arrays that :mod:`scalesched.predict.model`
evaluates in numpy at decision time, so policies and the simulator never import torch.

Both heads learn the log ratio of the truth to its static estimate (the role's output
estimate; the cost model's execution estimate on the chosen server), so an untrained head
already sits on the static estimate and the network learns corrections: from the
difficulty hint, the role and the queue state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalesched.errors import InputError
from scalesched.predict.features import STATIC_GROUPS
from scalesched.predict.model import QUANTILES, Head, QuantilePredictor
from scalesched.predict.samples import Samples

HIDDEN = 64
STEPS = 3000
"""Gradient steps per head, whatever the sample count (about 30 s on one core)."""
BATCH = 512
LR = 3e-3


def fit(samples: Samples, *, seed: int, meta: dict[str, Any] | None = None) -> QuantilePredictor:
    """Both heads and the static per-role baseline, from ``samples``; seeded."""
    if samples.tok_y.size < 20 or samples.dur_y.size < 20:
        raise InputError("--workflows", "workflows", "too few tasks to fit on (need 20 or more)")
    tok_target = np.log(samples.tok_y) - samples.tok_base
    dur_target = np.log(samples.dur_y) - samples.dur_base
    fin_target = np.log(samples.fin_y) - samples.fin_base
    return QuantilePredictor(
        tokens=fit_head(samples.tok_x, tok_target, seed=seed),
        duration=fit_head(samples.dur_x, dur_target, seed=seed + 1),
        finish=fit_head(samples.dur_x, fin_target, seed=seed + 2),
        static_tokens=static_table(tok_target, samples.tok_group),
        static_duration=static_table(dur_target, samples.dur_group),
        static_finish=static_table(fin_target, samples.dur_group),
        meta={
            **(meta or {}),
            "token_samples": int(samples.tok_y.size),
            "duration_samples": int(samples.dur_y.size),
            "hidden": HIDDEN,
            "steps": STEPS,
            "seed": seed,
        },
    )


def static_table(target: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per static group, the QUANTILES of the log ratio; groups without samples get the
    pooled quantiles."""
    levels = np.array(QUANTILES)
    pooled = np.quantile(target, levels) if target.size else np.zeros(len(levels))
    table = np.tile(pooled, (STATIC_GROUPS, 1))
    for g in range(STATIC_GROUPS):
        sel = target[group == g]
        if sel.size >= 20:
            table[g] = np.quantile(sel, levels)
    return table


def fit_head(x: np.ndarray, y: np.ndarray, *, seed: int) -> Head:
    """A two-hidden-layer MLP of monotone quantiles of ``y``, trained with pinball loss."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std > 1e-6, std, 1.0)
    xt = torch.tensor((x - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    n_q = len(QUANTILES)
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, n_q),
    )
    with torch.no_grad():  # start at the pooled quantiles of the target
        last = net[-1]
        assert isinstance(last, torch.nn.Linear)
        last.weight.mul_(0.1)
        start = np.quantile(y, QUANTILES) if y.size else np.zeros(n_q)
        inc = np.maximum(np.diff(start), 1e-3)
        last.bias.copy_(torch.tensor(np.r_[start[0], np.log(np.expm1(inc))], dtype=torch.float32))
    levels = torch.tensor(QUANTILES, dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS)
    for _ in range(STEPS):
        idx = torch.tensor(rng.integers(0, len(y), size=min(BATCH, len(y))))
        q = monotone_torch(net(xt[idx]))
        diff = yt[idx, None] - q
        loss = torch.maximum(levels * diff, (levels - 1.0) * diff).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return export_head(net, mean, std)


def export_head(net: Any, x_mean: np.ndarray, x_std: np.ndarray) -> Head:
    """The numpy twin of a ``Sequential`` of Linear and ReLU layers (weights as saved:
    float32)."""
    import torch

    layers = [m for m in net if isinstance(m, torch.nn.Linear)]
    return Head(
        weights=tuple(
            m.weight.detach().numpy().T.astype(np.float32).astype(np.float64) for m in layers
        ),
        biases=tuple(m.bias.detach().numpy().astype(np.float32).astype(np.float64) for m in layers),
        x_mean=x_mean,
        x_std=x_std,
    )


def monotone_torch(raw: Any) -> Any:
    """The torch twin of :func:`scalesched.predict.model.monotone`."""
    import torch

    first = raw[:, :1]
    return torch.cat([first, first + torch.cumsum(torch.nn.functional.softplus(raw[:, 1:]), 1)], 1)
