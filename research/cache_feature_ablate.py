"""Ablation: a cache-feature network acting with its two cache columns zeroed (as if no
server held anything), on the eval's runs (same scenario, window and seeds); rows in the
eval's results.csv format, for cache_feature_ratios.py.

    python research/cache_feature_ablate.py CHECKPOINT NAME OUT.csv
"""

from __future__ import annotations

import csv
import sys

import torch

from scalesched.cluster import get_cluster
from scalesched.decision.features import CACHED_SHARE_FEATURE, Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.nn.scheduler import load_scheduler
from scalesched.runs.setup import Scenario, prepare, run

torch.set_num_threads(1)


class Zeroed(BaseScheduler):
    """The network, shown server features whose cache columns are 0."""

    def __init__(self, path: str) -> None:
        self.inner = load_scheduler(path)
        self.name = "zeroed"

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)

    def select(self, decision: Decision) -> int:
        f = decision.server_features.copy()
        f[:, CACHED_SHARE_FEATURE:] = 0.0
        decision.server_features = f
        return self.inner.select(decision)


def main() -> None:
    path, name, out = sys.argv[1:4]
    rows = []
    for seed in range(5):
        setup = prepare(
            get_cluster("hetero-16"),
            Scenario(workload="tool-heavy", workflows=1450, load=0.8, seed=seed),
        )
        result = run(setup, Zeroed(path), kv_policy="lru")
        row = {"policy": name, "n_servers": 16, "seed": seed, "load": 0.8}
        row.update({k: v for k, v in result.metrics.items() if k not in ("policy", "n_servers")})
        rows.append(row)
        print(seed, row["avg_response_time_s"], flush=True)
    keys = list(rows[0])
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
