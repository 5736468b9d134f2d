"""Training environment settings.

:class:`Setting`: one (cluster, workload, load, arrivals, world) that an episode or a
validation run is in, as training configs list them (``more_settings``, ``settings``).

:class:`EnvSetting`: (workload pattern, load, mix of 16 servers, warm-up). EnvSched
(``scalesched.train.envsched``) samples among them; the environment runs one per episode
(``SchedulingEnv(setting_source=...)``). Every mix has 16 servers, so a policy trained over
them keeps the zero-shot claim (train and select at N = 16 only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import ConfigDict

from scalesched.cluster.model import ClusterSpec

PATTERN_NAMES: tuple[str, ...] = (
    "react",
    "plan-execute",
    "map-reduce",
    "debate",
    "codegen",
    "deep-research",
    "agentic-mix",
)
LOADS: tuple[float, ...] = (0.5, 0.7, 0.9)
WARMUPS: tuple[int, ...] = (50, 200)
MIXES: dict[str, tuple[tuple[str, int], ...]] = {
    "balanced": (("h100-80g-x4", 4), ("a100-80g-x4", 4), ("l4-24g-x4", 4), ("cpu-64c", 4)),
    "h100-rich": (("h100-80g-x4", 7), ("a100-80g-x4", 2), ("l4-24g-x4", 3), ("cpu-64c", 4)),
    "l4-edge": (("h100-80g-x4", 2), ("a100-80g-x4", 2), ("l4-24g-x4", 8), ("cpu-64c", 4)),
    "cpu-heavy": (("h100-80g-x4", 3), ("a100-80g-x4", 3), ("l4-24g-x4", 3), ("cpu-64c", 7)),
}
"""Mixes of 16 servers; "balanced" is hetero-16's composition."""
SERVER_TYPES: tuple[str, ...] = ("h100-80g-x4", "a100-80g-x4", "l4-24g-x4", "cpu-64c")


@dataclass
class Setting:
    """One (cluster, workload, load, arrival process) that episodes and validation run on."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    cluster: str
    workload: str
    load: float
    arrivals: str = "poisson"
    residency: str | None = None
    """``planned`` or ``dynamic``; None: the config's ``residency``."""


@dataclass(frozen=True)
class EnvSetting:
    """One training environment configuration."""

    workload: str
    load: float
    mix: str
    warmup_workflows: int

    def cluster(self) -> ClusterSpec:
        from scalesched.cluster.spec import cluster_from_dict, get_cluster

        if self.mix == "balanced":
            return get_cluster("hetero-16")  # the same servers; its capacity ships measured
        servers = [{"type": t, "count": c} for t, c in MIXES[self.mix]]
        return cluster_from_dict({"name": f"mix-{self.mix}-16", "servers": servers}, "envsched")

    def features(self) -> np.ndarray:
        """Numeric description for the similarity graph: pattern one-hot, load, the mix's
        server shares, log warm-up."""
        pattern = np.array([self.workload == p for p in PATTERN_NAMES], dtype=float)
        counts = dict(MIXES[self.mix])
        shares = np.array([counts.get(t, 0) / 16 for t in SERVER_TYPES])
        return np.concatenate(
            [pattern, [2.0 * self.load], 2.0 * shares, [math.log(self.warmup_workflows) / 5]]
        )


def default_settings() -> list[EnvSetting]:
    """Every pattern x load x 16-server mix x warm-up length: 168 settings."""
    return [
        EnvSetting(w, load, mix, warm)
        for w in PATTERN_NAMES
        for load in LOADS
        for mix in MIXES
        for warm in WARMUPS
    ]
