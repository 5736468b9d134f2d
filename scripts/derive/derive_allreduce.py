#!/usr/bin/env python3
"""Derive the tensor-parallel all-reduce table ``src/scalesched/cluster/data/allreduce.json``.

Reads the Vidur all-reduce profiles ``<shared>/llm-profiles/network/{a100,h100}_dgx.all_reduce.csv``
(one 8-GPU NVLink server; median time per message size and worker count) and writes, per
measured GPU type and tp degree (2, 4, 8), the median time at ~40 log-spaced message sizes,
made non-decreasing in size by isotonic regression (pool adjacent violators).  GPU types with
no NVLink profile (A40, L40S, L4: PCIe servers) get a ring all-reduce alpha-beta model whose
two constants are stated below (an assumption, not a measurement).  Method: docs/cost-model.md.

Usage: python scripts/derive/derive_allreduce.py [SHARED_DATA_DIR]   (default ../shared/data)
The package never reads the shared directory at run time; rerun this script to refresh.
"""

from __future__ import annotations

import csv
import datetime as dt
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from derive_common import reference_folder, write_json  # a sibling

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "scalesched" / "cluster" / "data" / "allreduce.json"
PROFILES = {"A100-80G": "a100", "H100-80G": "h100"}
WORKERS = (2, 4, 8)
N_SIZES = 40
# PCIe servers (no NVLink profile): ring all-reduce over PCIe 4.0 x16.
PCIE_ALPHA_S = 10e-6
"""Per ring step latency (kernel launch + PCIe round trip), about the A100 small-message floor."""
PCIE_BUS_GBS = 20.0
"""Effective PCIe 4.0 x16 bandwidth per direction, GB/s (32 GB/s nominal)."""


def isotonic(y: np.ndarray) -> np.ndarray:
    """Non-decreasing least-squares fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in y:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out: list[float] = []
    for s, c in blocks:
        out.extend([s / c] * int(c))
    return np.array(out)


def read(path: Path) -> dict[int, dict[int, list[float]]]:
    """workers -> size -> median times (ms), intra-node rows only."""
    rows: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with path.open() as fh:
        for r in csv.DictReader(fh):
            w = int(r["num_workers"])
            if w not in WORKERS or int(r["devices_per_node"]) != w:
                continue
            rows[w][int(r["size"])].append(float(r["time_stats.all_reduce.median"]))
    return rows


def main() -> int:
    net, path = reference_folder(__doc__, OUT, "llm-profiles/network")
    gpus: dict[str, dict[str, list[float]]] = {}
    grid: np.ndarray | None = None
    for gpu, prefix in PROFILES.items():
        rows = read(net / f"{prefix}_dgx.all_reduce.csv")
        gpus[gpu] = {}
        for w in WORKERS:
            sizes = np.array(sorted(rows[w]), dtype=float)
            med = np.array([np.median(rows[w][int(s)]) for s in sizes])
            if grid is None:
                grid = np.unique(np.geomspace(sizes[0], sizes[-1], N_SIZES).round())
            fit = isotonic(med)
            ms = np.interp(np.log(grid), np.log(sizes), fit)
            gpus[gpu][str(w)] = [round(float(v) / 1e3, 9) for v in ms]  # seconds
    assert grid is not None
    out = {
        "sizes_bytes": [int(s) for s in grid],
        "seconds": gpus,
        "pcie_ring": {"alpha_s": PCIE_ALPHA_S, "bus_gbs": PCIE_BUS_GBS},
        "provenance": {
            "network_profiles": "Vidur project (microsoft/vidur, MIT licence, commit 7d47513, "
            "data/profiling/network/): {a100,h100}_dgx.all_reduce.csv, intra-node rows "
            "(devices_per_node == num_workers), median column, isotonic in size",
            "pcie_ring": "assumed, not measured: ring all-reduce 2(n-1) steps of alpha plus "
            "2(n-1)/n x bytes / bus bandwidth, for GPU types without an NVLink profile",
            "method": "docs/cost-model.md",
            "script": "scripts/derive/derive_allreduce.py",
            "date": dt.date.today().isoformat(),
        },
    }
    write_json(path, out, f"{len(grid)} sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
