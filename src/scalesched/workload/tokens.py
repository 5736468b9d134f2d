"""Prompt and output token-length distributions from production traces.

``data/token_lengths.json`` holds 101 quantiles (0%..100%, plus 0.1% steps in the top
percentile) of the prompt and output lengths of the Splitwise coding and conversation
traces (derived by scripts/derive_token_lengths.py, provenance inside).
``TokenDist.sample`` draws by inverse CDF, interpolating linearly between the quantiles.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import numpy as np

from scalesched.errors import InputError

_SOURCE = "token_lengths.json"


class TokenDist:
    """An empirical length distribution: quantiles at 0, 1, ..., 100 percent, refined in the
    top percentile by ``tail`` quantiles at 99.0, 99.1, ..., 100 percent."""

    __slots__ = ("name", "mean", "median", "count", "_q", "_tail")

    def __init__(
        self,
        name: str,
        quantiles: list[float],
        mean: float,
        count: int = 0,
        tail: list[float] | None = None,
    ) -> None:
        q = [float(v) for v in quantiles]
        t = [q[99], q[100]] if tail is None else [float(v) for v in tail]
        if len(q) != 101 or len(t) < 2 or t[0] != q[99] or t[-1] != q[100]:
            raise InputError(name, "quantiles", "need 101 quantiles and a tail from p99 to max")
        if any(b < a for seq in (q, t) for a, b in zip(seq, seq[1:], strict=False)):
            raise InputError(name, "quantiles", "quantiles must be non-decreasing")
        self.name = name
        self._q = q
        self._tail = t
        self.mean = float(mean)
        self.count = int(count)
        self.median = self.quantile(0.5)

    def __repr__(self) -> str:
        return f"TokenDist({self.name!r}, mean={self.mean:.1f}, median={self.median:.1f})"

    def _at(self, u: float) -> float:
        x = u * 100.0
        i = int(x)
        if i < 99:
            q = self._q
            return q[i] + (x - i) * (q[i + 1] - q[i])
        t = self._tail
        m = len(t) - 1
        y = (x - 99.0) * m
        j = min(int(y), m - 1)
        return t[j] + (y - j) * (t[j + 1] - t[j])

    def quantile(self, q: float) -> float:
        """The q-quantile (0 <= q <= 1), linear between the stored quantiles."""
        if not 0.0 <= q <= 1.0:
            raise InputError(self.name, "q", f"quantile level must be in [0, 1], got {q}")
        return self._at(q)

    def sample(
        self, rng: np.random.Generator, scale: float = 1.0, lo: int = 1, hi: int | None = None
    ) -> int:
        """One length: inverse-CDF draw, times ``scale``, rounded, clipped to [lo, hi]."""
        n = int(self._at(rng.random()) * scale + 0.5)
        if n < lo:
            return lo
        if hi is not None and n > hi:
            return hi
        return n


def _load() -> tuple[dict[str, Any], dict[str, TokenDist]]:
    text = resources.files("scalesched.workload").joinpath("data", _SOURCE).read_text()
    data: dict[str, Any] = json.loads(text)
    dists = {
        name: TokenDist(name, d["quantiles"], d["mean"], d["count"], d.get("tail_quantiles"))
        for name, d in data["dists"].items()
    }
    return data["provenance"], dists


PROVENANCE, TOKEN_DISTS = _load()
"""TOKEN_DISTS keys: code_prompt, code_output, conv_prompt, conv_output."""


def get_token_dist(name: str, source: str = "token distribution") -> TokenDist:
    """TOKEN_DISTS[name], or InputError naming ``source`` and the known names."""
    dist = TOKEN_DISTS.get(name)
    if dist is None:
        known = ", ".join(TOKEN_DISTS)
        raise InputError(source, "name", f"unknown token distribution {name!r}; known: {known}")
    return dist
