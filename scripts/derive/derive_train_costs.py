#!/usr/bin/env python3
"""Derive the per-layer training cost table ``src/scalesched/memplan/data/train_costs.json``.

Reads the same Vidur per-operator profiles as ``derive_llm_perf.py`` (tensor-parallel degree
1: one GPU trains the whole model) and writes, per model and GPU type, the forward time of ONE
transformer layer split into two operator classes at the measured num_tokens grid:

- ``gemm_s``: attn_pre_proj + attn_post_proj + mlp_up_proj + mlp_down_proj (matrix multiplies);
- ``other_s``: input_layernorm + attn_rope + post_attention_layernorm + mlp_act + add
  (element-wise and normalisation ops, memory-bound);

plus ``emb_s`` (the embedding lookup, once per pass).  Each series is made non-decreasing by
isotonic regression, as in the inference tables.  Unmeasured GPUs (L40S, L4) are scaled from
A40: the GEMM class by the same compute/bandwidth roofline blend as the inference tables, the
memory-bound classes by the bandwidth ratio.  Backward multiples, attention and the LM head
are applied at run time (``scalesched.memplan.costs``; method in docs/memplan.md).

Usage: python scripts/derive/derive_train_costs.py [SHARED_DATA_DIR]   (default ../shared/data)
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import defaultdict
from pathlib import Path

import numpy as np
from derive_common import reference_folder, write_json  # a sibling
from derive_llm_perf import GPUS, GRID, MODELS, isotonic, roofline_scale, sig  # a sibling

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "scalesched" / "memplan" / "data" / "train_costs.json"

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
OTHER_OPS = ("input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add")
CLASSES = {"gemm_s": GEMM_OPS, "other_s": OTHER_OPS, "emb_s": ("emb",)}


def read_classes(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per class, the tp=1 per-layer seconds on GRID (duplicates averaged, isotonic fit)."""
    acc: dict[str, dict[int, list[float]]] = {c: defaultdict(list) for c in CLASSES}
    shape: dict[str, str] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if int(row["num_tensor_parallel_workers"]) != 1:
                continue
            n = int(row["num_tokens"])
            for cls, ops in CLASSES.items():
                ms = sum(float(row.get(f"time_stats.{op}.median") or 0.0) for op in ops)
                acc[cls][n].append(ms / 1e3)
            shape = {k: row[k] for k in ("n_embd", "n_expanded_embd", "vocab_size")}
    out = {}
    for cls, by_n in acc.items():
        ns = np.array(sorted(by_n))
        assert set(GRID) <= set(ns.tolist()), (path, cls)
        fit = isotonic(np.array([float(np.mean(by_n[n])) for n in ns]))
        out[cls] = fit[np.searchsorted(ns, np.array(GRID))]
    return out, shape


def main() -> int:
    prof_dir, out = reference_folder(__doc__, OUT, "llm-profiles")
    grid = np.array(GRID, dtype=float)
    tables: dict[str, dict[str, dict[str, list[float]]]] = {}
    shapes: dict[str, dict[str, int]] = {}
    for mname, m in MODELS.items():
        measured: dict[str, dict[str, np.ndarray]] = {}
        for gname, g in GPUS.items():
            if "profile" in g:
                measured[gname], shape = read_classes(
                    prof_dir / g["profile"] / f"{m['profile']}.mlp.csv"
                )
                shapes[mname] = {
                    "ffn": int(shape["n_expanded_embd"]),
                    "vocab": int(shape["vocab_size"]),
                }
        tables[mname] = {}
        for gname, g in GPUS.items():
            src = g.get("derived_from", gname)
            per = dict(measured[src])
            if src != gname:
                vocab = shapes[mname]["vocab"]
                per["gemm_s"] = per["gemm_s"] * roofline_scale(grid, m, vocab, GPUS[src], g, 1)
                bw_ratio = GPUS[src]["mem_bw_gbs"] / g["mem_bw_gbs"]
                per["other_s"] = per["other_s"] * bw_ratio
                per["emb_s"] = per["emb_s"] * bw_ratio
            tables[mname][gname] = {k: [sig(v) for v in s] for k, s in per.items()}
    doc = {
        "provenance": {
            "kernel_profiles": "Vidur project (microsoft/vidur, MIT licence, commit 7d47513, "
            "data/profiling/): per-operator kernel times of one layer, tp=1, median columns",
            "specs": "shared/data/gpu-and-model-specs.md (vendor data sheets, model configs)",
            "method": "docs/memplan.md",
            "script": "scripts/derive/derive_train_costs.py",
            "date": dt.date.today().isoformat(),
        },
        "units": "seconds of ONE layer's forward pass over num_tokens tokens, by op class",
        "grid_tokens": GRID,
        "shapes": shapes,
        "forward_s": tables,
    }
    write_json(out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
