#!/usr/bin/env python3
"""Derive the compact LLM cost-model tables ``src/scalesched/cluster/data/llm_perf.json``.

Reads the Vidur per-operator profiles under ``<shared>/llm-profiles/{a100,a40,h100}`` and
writes, for every (model, GPU type, tensor-parallel degree), the time of one forward pass of
everything except attention (all layers' linear/norm/activation ops, the embedding and the
LM head) at ~40 num_tokens points.  See docs/cost-model.md for every modelling choice.

Usage: python scripts/derive/derive_llm_perf.py [SHARED_DATA_DIR]   (default ../shared/data)
The package never reads the shared directory at run time; rerun this script to refresh.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import defaultdict
from pathlib import Path

import numpy as np
from derive_common import reference_folder, write_json  # a sibling

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "scalesched" / "cluster" / "data" / "llm_perf.json"

# Public data-sheet figures, per GPU (gpu-and-model-specs.md). Dense BF16/FP16 TFLOPS.
GPUS: dict[str, dict] = {
    "H100-80G": {"memory_gb": 80.0, "mem_bw_gbs": 3350.0, "tflops": 989.0, "profile": "h100"},
    "A100-80G": {"memory_gb": 80.0, "mem_bw_gbs": 2040.0, "tflops": 312.0, "profile": "a100"},
    "A40-48G": {"memory_gb": 48.0, "mem_bw_gbs": 696.0, "tflops": 150.0, "profile": "a40"},
    "L40S-48G": {
        "memory_gb": 48.0,
        "mem_bw_gbs": 864.0,
        "tflops": 362.0,
        "derived_from": "A40-48G",
    },
    "L4-24G": {"memory_gb": 24.0, "mem_bw_gbs": 300.0, "tflops": 121.0, "derived_from": "A40-48G"},
}

# Published model configurations (gpu-and-model-specs.md); weights are FP16. vocab_size and
# context_window (max_position_embeddings) are each model's published config.json values;
# "vocab" below is the profiled (padded) LM-head width, which prices the LM head.
MODELS: dict[str, dict] = {
    "phi-2": {
        "profile": "phi-2",
        "layers": 32,
        "hidden": 2560,
        "heads": 32,
        "kv_heads": 32,
        "params_b": 2.7,
        "weight_gb": 5.6,
        "vocab_size": 51200,
        "context_window": 2048,
    },
    "llama-2-7b": {
        "profile": "Llama-2-7b-hf",
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 32,
        "params_b": 6.7,
        "weight_gb": 13.5,
        "vocab_size": 32000,
        "context_window": 4096,
    },
    "codellama-34b": {
        "profile": "CodeLlama-34b-Instruct-hf",
        "layers": 48,
        "hidden": 8192,
        "heads": 64,
        "kv_heads": 8,
        "params_b": 33.7,
        "weight_gb": 67.5,
        "vocab_size": 32016,
        "context_window": 16384,
    },
    "llama-2-70b": {
        "profile": "Llama-2-70b-hf",
        "layers": 80,
        "hidden": 8192,
        "heads": 64,
        "kv_heads": 8,
        "params_b": 69.0,
        "weight_gb": 138.0,
        "vocab_size": 32000,
        "context_window": 4096,
    },
}

LAYER_OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
"""Per-layer non-attention ops; phi-2 (parallel attention/MLP block) has no
post_attention_layernorm column, which then counts as zero."""

# num_tokens grid: every point is a measured num_tokens; dense up to 512 (decode batches).
GRID = [
    1,
    2,
    4,
    8,
    16,
    24,
    32,
    40,
    48,
    56,
    64,
    80,
    96,
    112,
    128,
    144,
    160,
    192,
    224,
    256,
    288,
    320,
    384,
    448,
    512,
    640,
    768,
    896,
    1024,
    1280,
    1536,
    1792,
    2048,
    2560,
    3072,
    3584,
    4096,
]
TPS = (1, 2, 4, 8)


def isotonic(y: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit (pool adjacent violators)."""
    vals: list[float] = []
    wts: list[int] = []
    for v in y.tolist():
        vals.append(v)
        wts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            v2, w2 = vals.pop(), wts.pop()
            v1, w1 = vals.pop(), wts.pop()
            vals.append((v1 * w1 + v2 * w2) / (w1 + w2))
            wts.append(w1 + w2)
    return np.repeat(vals, wts)


def read_profile(path: Path, layers: int) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], dict]:
    """{tp: (num_tokens, seconds)} for layers x per-layer ops + emb; plus the shape columns."""
    acc: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    shape: dict = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            ms_layer = sum(float(row.get(f"time_stats.{op}.median") or 0.0) for op in LAYER_OPS)
            ms = ms_layer * layers + float(row["time_stats.emb.median"])
            tp = int(row["num_tensor_parallel_workers"])
            acc[tp][int(row["num_tokens"])].append(ms / 1e3)
            shape = {k: row[k] for k in ("n_head", "n_kv_head", "n_embd", "vocab_size")}
    out = {}
    for tp, by_n in acc.items():
        ns = np.array(sorted(by_n))
        # duplicate (num_tokens, tp) rows: average their medians
        out[tp] = (ns, np.array([float(np.mean(by_n[n])) for n in ns]))
    return out, shape


def lm_head_s(n: np.ndarray, vocab: int, hidden: int, gpu: dict, tp: int) -> np.ndarray:
    flops = 2.0 * vocab * hidden * n / (gpu["tflops"] * 1e12)
    mem = vocab * hidden * 2.0 / (gpu["mem_bw_gbs"] * 1e9)
    return np.maximum(flops, mem) / tp


def roofline_scale(n: np.ndarray, m: dict, vocab: int, src: dict, dst: dict, tp: int) -> np.ndarray:
    """Factor t_dst / t_src per num_tokens: blend of compute and bandwidth ratios, weighted by
    the compute share w of the op mix on the source GPU (FLOPs and weight bytes only)."""
    lin_params = m["params_b"] * 1e9 - 2 * vocab * m["hidden"]  # without emb and LM head
    compute = 2.0 * lin_params * n / tp / (src["tflops"] * 1e12)
    memory = 2.0 * lin_params / tp / (src["mem_bw_gbs"] * 1e9)
    w = compute / (compute + memory)
    return w * src["tflops"] / dst["tflops"] + (1 - w) * src["mem_bw_gbs"] / dst["mem_bw_gbs"]


def sig(x: float) -> float:
    return float(f"{x:.6g}")


def main() -> int:
    prof_dir, out = reference_folder(__doc__, OUT, "llm-profiles")

    grid = np.array(GRID, dtype=float)
    tables: dict[str, dict[str, dict[str, list[float]]]] = {}
    models_out: dict[str, dict] = {}
    for mname, m in MODELS.items():
        tables[mname] = {}
        measured: dict[str, dict[int, np.ndarray]] = {}  # gpu -> tp -> layers+emb on GRID
        vocab = hidden = 0
        for gname, g in GPUS.items():
            if "profile" not in g:
                continue
            prof, shape = read_profile(
                prof_dir / g["profile"] / f"{m['profile']}.mlp.csv", m["layers"]
            )
            assert int(shape["n_embd"]) == m["hidden"], (mname, shape)
            assert int(shape["n_head"]) == m["heads"] and int(shape["n_kv_head"]) == m["kv_heads"]
            vocab, hidden = int(shape["vocab_size"]), m["hidden"]
            measured[gname] = {}
            for tp, (ns, secs) in prof.items():
                assert set(GRID) <= set(ns.tolist()), (mname, gname, tp)
                fit = isotonic(secs)
                measured[gname][tp] = fit[np.searchsorted(ns, grid)]
        for gname, g in GPUS.items():
            src_name = g.get("derived_from", gname)
            per_tp: dict[str, list[float]] = {}
            for tp in TPS:
                base = measured[src_name].get(tp)
                if base is None:
                    continue
                if src_name != gname:
                    base = base * roofline_scale(grid, m, vocab, GPUS[src_name], g, tp)
                total = base + lm_head_s(grid, vocab, hidden, g, tp)
                total = np.maximum.accumulate(total)
                per_tp[str(tp)] = [sig(v) for v in total]
            tables[mname][gname] = per_tp
        kv_bytes = 2 * m["layers"] * m["kv_heads"] * (m["hidden"] // m["heads"]) * 2
        models_out[mname] = {
            "layers": m["layers"],
            "hidden": m["hidden"],
            "heads": m["heads"],
            "kv_heads": m["kv_heads"],
            "params_b": m["params_b"],
            "weight_bytes": m["weight_gb"] * 1e9,
            "kv_bytes_per_token": kv_bytes,
            "vocab": vocab,
            "vocab_size": m["vocab_size"],
            "context_window": m["context_window"],
            "profile": m["profile"],
        }

    doc = {
        "provenance": {
            "kernel_profiles": "Vidur project (microsoft/vidur, MIT licence, commit 7d47513, "
            "data/profiling/): per-operator MLP-block kernel times on A100-80G, A40, H100; "
            "median columns",
            "gpu_and_model_specs": "vendor data sheets (H100 SXM5, A100 SXM4 80GB, A40, L40S, "
            "L4; dense FP16 tensor TFLOPS) and published model configurations, as collected "
            "in shared/data/gpu-and-model-specs.md; vocab_size and context_window "
            "(max_position_embeddings) from each model's published config.json",
            "method": "docs/cost-model.md",
            "script": "scripts/derive/derive_llm_perf.py",
            "date": dt.date.today().isoformat(),
        },
        "units": "linear_s: seconds for one forward pass over num_tokens tokens "
        "(all layers' non-attention ops + embedding + LM head), by model, GPU type, tp",
        "grid_tokens": GRID,
        "gpus": {
            k: {
                "memory_gb": v["memory_gb"],
                "mem_bw_gbs": v["mem_bw_gbs"],
                "tflops": v["tflops"],
                "measured": "profile" in v,
                "derived_from": v.get("derived_from"),
            }
            for k, v in GPUS.items()
        },
        "models": models_out,
        "linear_s": tables,
    }
    write_json(out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
