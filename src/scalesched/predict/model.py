"""A trained quantile predictor, evaluated in numpy (schedulers never import torch).

A predictor has two heads, small MLPs (ReLU) trained with pinball loss
(:mod:`scalesched.predict.train`):

* ``tokens``: quantiles of ln(true output tokens) - ln(static estimate), LLM tasks;
* ``duration``: quantiles of ln(execution seconds, start to end) - ln(cost-model estimate)
  on a given server;
* ``finish``: quantiles of ln(seconds from the decision to the task's end: transfer, wait,
  model load and execution) - ln(the cost model's finish estimate) on a given server. The
  tail router reads this one: the wait behind a queue is as uncertain as the execution.

Quantiles are monotone by construction: the first output is the lowest level, the others
add ``softplus`` increments. It also carries the **static per-role** baseline it is
compared with: per role, the same quantile levels of the same log ratios over the training
traces (a fixed spread around the static estimate, identical for every task of a role).

Saved as one ``.npz`` (arrays plus a JSON ``meta`` string), read without pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scalesched.errors import InputError
from scalesched.predict.features import STATIC_GROUPS

QUANTILES: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99)
"""Levels every head predicts: the 80% interval is [0.1, 0.9], the 90% one [0.05, 0.95]."""
FORMAT = "scalesched-quantile-predictor"
VERSION = 1
HEADS = ("tokens", "duration", "finish")


@dataclass(frozen=True)
class Head:
    """One MLP: standardise, ReLU hidden layers, monotone quantile outputs."""

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    x_mean: np.ndarray
    x_std: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """(k, inputs) -> (k, len(QUANTILES)) quantiles of the log ratio, increasing."""
        h = (x - self.x_mean) / self.x_std
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < last:
                h = np.maximum(h, 0.0)
        return monotone(h)


def monotone(raw: np.ndarray) -> np.ndarray:
    """First column as is, then cumulative softplus increments (the torch side does the
    same: ``scalesched.predict.train``)."""
    out = np.empty_like(raw)
    out[:, 0] = raw[:, 0]
    out[:, 1:] = raw[:, :1] + np.cumsum(np.logaddexp(0.0, raw[:, 1:]), axis=1)
    return out


@dataclass(frozen=True)
class QuantilePredictor:
    """Both heads, the static per-role baseline, and where they came from."""

    tokens: Head
    duration: Head
    finish: Head
    static_tokens: np.ndarray
    """(STATIC_GROUPS, len(QUANTILES)) log-ratio quantiles per group
    (:func:`scalesched.predict.features.static_group`)."""
    static_duration: np.ndarray
    static_finish: np.ndarray
    meta: dict[str, Any]

    def token_quantiles(self, x: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """(k, Q) quantiles of output tokens."""
        return np.exp(self.tokens(x) + baseline[:, None])

    def duration_quantiles(self, x: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """(k, Q) quantiles of execution seconds."""
        return np.exp(self.duration(x) + baseline[:, None])


def quantile_at(q: np.ndarray, level: float) -> np.ndarray:
    """Column of the predicted ``level`` (one of QUANTILES)."""
    return q[:, QUANTILES.index(level)]


def save(predictor: QuantilePredictor, path: Path) -> None:
    arrays: dict[str, np.ndarray] = {
        "static_tokens": predictor.static_tokens,
        "static_duration": predictor.static_duration,
        "static_finish": predictor.static_finish,
    }
    for name in HEADS:
        head: Head = getattr(predictor, name)
        arrays[f"{name}.x_mean"] = head.x_mean
        arrays[f"{name}.x_std"] = head.x_std
        for i, (w, b) in enumerate(zip(head.weights, head.biases, strict=True)):
            arrays[f"{name}.w{i}"] = w.astype(np.float32)
            arrays[f"{name}.b{i}"] = b.astype(np.float32)
    meta = {**predictor.meta, "format": FORMAT, "version": VERSION, "quantiles": QUANTILES}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
        np.savez_compressed(fh, allow_pickle=False, **arrays)


def load(path: str | Path) -> QuantilePredictor:
    """Read a predictor file; any problem is an InputError naming the file and the field."""
    from scalesched.predict.features import DURATION_INPUTS, TASK_INPUTS

    src = str(path)
    p = Path(path)
    if not p.is_file():
        raise InputError(src, "model", "no such predictor file (make one with predict fit)")
    try:
        with np.load(p, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # zip, npy or pickle errors: not a predictor file
        raise InputError(
            src, "model", f"not a predictor .npz file ({type(exc).__name__})"
        ) from None
    if "meta" not in arrays:
        raise InputError(src, "meta", "missing: not a predictor file")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError:
        raise InputError(src, "meta", "not valid JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(src, "meta.format", f"expected {FORMAT!r}")
    quantiles = meta.get("quantiles")
    if (
        meta.get("version") != VERSION
        or not isinstance(quantiles, list)
        or (tuple(quantiles) != QUANTILES)
    ):
        raise InputError(src, "meta.version", f"expected version {VERSION} with {QUANTILES}")
    n_q = len(QUANTILES)
    heads = {}
    for name, inputs in (
        ("tokens", TASK_INPUTS),
        ("duration", DURATION_INPUTS),
        ("finish", DURATION_INPUTS),
    ):
        heads[name] = _load_head(src, arrays, name, inputs, n_q)
    static = {}
    for key in ("static_tokens", "static_duration", "static_finish"):
        a = _numeric(src, key, arrays.get(key))
        if a is None or a.shape != (STATIC_GROUPS, n_q) or not np.isfinite(a).all():
            raise InputError(src, key, f"need a finite ({STATIC_GROUPS}, {n_q}) array")
        static[key] = a.astype(np.float64)
    return QuantilePredictor(
        tokens=heads["tokens"],
        duration=heads["duration"],
        finish=heads["finish"],
        static_tokens=static["static_tokens"],
        static_duration=static["static_duration"],
        static_finish=static["static_finish"],
        meta=meta,
    )


def _load_head(src: str, arrays: dict[str, np.ndarray], name: str, inputs: int, n_q: int) -> Head:
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    width = inputs
    i = 0
    while f"{name}.w{i}" in arrays:
        w = _numeric(src, f"{name}.w{i}", arrays[f"{name}.w{i}"])
        b = _numeric(src, f"{name}.b{i}", arrays.get(f"{name}.b{i}"))
        if w is None or w.ndim != 2 or w.shape[0] != width or b is None or b.shape != (w.shape[1],):
            shape = None if w is None else w.shape
            raise InputError(src, f"{name}.w{i}", f"shape {shape} does not follow width {width}")
        weights.append(w.astype(np.float64))
        biases.append(b.astype(np.float64))
        width = w.shape[1]
        i += 1
    if not weights or width != n_q:
        raise InputError(src, f"{name}.w", f"need layers ending in {n_q} quantile outputs")
    mean = _numeric(src, f"{name}.x_mean", arrays.get(f"{name}.x_mean"))
    std = _numeric(src, f"{name}.x_std", arrays.get(f"{name}.x_std"))
    if mean is None or std is None or mean.shape != (inputs,) or std.shape != (inputs,):
        raise InputError(src, f"{name}.x_mean", f"need ({inputs},) input scaling arrays")
    if not all(np.isfinite(a).all() for a in (*weights, *biases, mean, std)) or (std <= 0).any():
        raise InputError(src, name, "weights and scalings must be finite, scalings > 0")
    return Head(tuple(weights), tuple(biases), mean.astype(np.float64), std.astype(np.float64))


def _numeric(src: str, key: str, a: np.ndarray | None) -> np.ndarray | None:
    """``a`` as float64 (None stays None), or an InputError naming ``key`` when the file
    stores text, bytes, booleans or complex numbers there instead of real numbers."""
    if a is None:
        return None
    if a.dtype.kind not in "fiu":
        raise InputError(src, key, f"must be an array of real numbers, got dtype {a.dtype}")
    return a.astype(np.float64)


_DEFAULT: QuantilePredictor | None = None
DEFAULT_FILE = "default_predictor.npz"


def default_predictor() -> QuantilePredictor:
    """The shipped predictor (``scripts/derive/fit_default_predictor.py`` regenerates it)."""
    global _DEFAULT
    if _DEFAULT is None:
        from importlib import resources

        ref = resources.files("scalesched.predict").joinpath("data", DEFAULT_FILE)
        with resources.as_file(ref) as p:
            _DEFAULT = load(p)
    return _DEFAULT
