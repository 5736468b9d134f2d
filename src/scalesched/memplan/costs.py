"""Training cost model: per-layer forward/backward time and memory of one training iteration.

Forward times of a layer's matrix multiplies and element-wise ops come from the measured
kernel profiles (``data/train_costs.json``, derived by ``scripts/derive/derive_train_costs.py``,
tensor-parallel degree 1); attention and the LM head are added analytically, as in the
inference cost model (``scalesched.cluster.perf``).  Backward is a documented multiple of the
forward per operator class (``BWD_MULTIPLE``).  Sizes follow the usual mixed-precision Adam
accounting.  Host links (PCIe, NVMe), host memory and the CPU optimizer's bandwidth are
per-GPU-type defaults that the caller may override.  Method and sources: docs/memplan.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from scalesched.cluster.perf import GPU_TYPES, MODELS, PREFILL_ATTN_EFF
from scalesched.errors import InputError

BWD_MULTIPLE: dict[str, float] = {
    "gemm": 2.0,
    "other": 2.0,
    "attention": 2.5,
    "embedding": 1.0,
    "lm_head": 2.0,
}
"""Backward time as a multiple of the forward, per operator class.  GEMMs: two products of
the forward's size, the input gradient and the weight gradient (Kaplan et al. 2020;
Narayanan et al. 2021).  Element-wise and normalisation ops are memory-bound and read the
saved input and the incoming gradient and write one gradient: about twice the bytes.
FlashAttention's backward runs 5 matrix products against the forward's 2 and recomputes the
softmax; 2.5x (Dao 2023).  The embedding's backward is a scatter-add of the same rows."""

ACT_BYTES_PER_SBH = 34.0
"""Activation bytes a layer keeps for its backward, per token per hidden unit, in 16-bit
training with FlashAttention (Korthikanti et al. 2023: ``sbh(34 + 5as/h)``, whose second
term FlashAttention removes)."""
CKPT_BYTES_PER_SBH = 2.0
"""A checkpointed layer keeps only its 16-bit input."""
GPU_USABLE_FRACTION = 0.92
"""Fraction of GPU memory a plan may use; the rest is the CUDA context, the allocator's
fragmentation and library workspaces."""
ADAM_BYTES_PER_PARAM = {"fp32": 28.0, "8bit": 16.0}
"""Bytes an Adam step moves per parameter: read master weight, both moments and the 16-bit
gradient, write master, moments and the 16-bit weight (fp32 moments 4 B each; 8-bit
block-wise moments 1 B each, Dettmers et al. 2022)."""
STATE_BYTES_PER_PARAM = {"fp32": 12.0, "8bit": 6.0}
"""Optimizer state per parameter: fp32 master weight (4 B) plus two Adam moments (fp32: 8 B,
8-bit: 2 B)."""
ADAM_GPU_BW_EFF = 0.7
"""Fraction of HBM bandwidth a fused Adam kernel reaches."""

PCIE_GBS: dict[str, float] = {"H100-80G": 50.0}
"""Achieved host<->GPU bandwidth per direction: PCIe Gen5 x16 on H100 hosts (~45-55 GB/s),
Gen4 x16 elsewhere (``DEFAULT_PCIE_GBS``, ~22-26 GB/s); gpu-and-model-specs.md."""
DEFAULT_PCIE_GBS = 25.0
NVME_READ_GBS = 6.0
NVME_WRITE_GBS = 5.0
"""One PCIe Gen4 x4 NVMe drive, large sequential chunks (vendor ~7 and 5-6 GB/s)."""
CPU_MEM_GB = 1024.0
"""Host memory a plan may use: a two-socket server with 16 x 64 GB DIMMs (override with
``--cpu-mem-gb``)."""
NVME_GB = 3840.0
"""One 3.84 TB drive."""
CPU_ADAM_GBS = 60.0
"""Host memory bandwidth the CPU Adam step achieves (a vectorised CPU-Adam, as in
ZeRO-Offload, is memory-bound; ~half the theoretical bandwidth of an 8-channel DDR server)."""

_SOURCE = "train_costs.json"


@dataclass(frozen=True, slots=True)
class Hardware:
    """One GPU and its host: capacities (bytes) and bandwidths (GB/s)."""

    gpu: str
    gpu_mem_bytes: float
    hbm_gbs: float
    tflops: float
    pcie_gbs: float
    nvme_read_gbs: float
    nvme_write_gbs: float
    cpu_mem_bytes: float
    nvme_bytes: float
    cpu_adam_gbs: float


@dataclass(frozen=True, slots=True)
class TrainCosts:
    """Everything a plan's time and memory depend on, for one model, GPU, batch and seq.

    Per-layer tuples have one entry per transformer layer (all equal for a real model; the
    tests also build uneven ones).  Times in seconds, sizes in bytes.
    """

    model: str
    batch: int
    seq: int
    hw: Hardware
    fwd_s: tuple[float, ...]
    bwd_s: tuple[float, ...]
    act_bytes: tuple[float, ...]
    """Activations a layer keeps for its backward."""
    ckpt_bytes: tuple[float, ...]
    """The layer input a recomputed layer keeps."""
    ws_bytes: tuple[float, ...]
    """Transient working memory of the layer's backward (gradient buffers)."""
    params: tuple[float, ...]
    """Parameters whose state the layer carries (embedding and LM head spread evenly)."""
    emb_fwd_s: float
    emb_bwd_s: float
    head_fwd_s: float
    head_bwd_s: float
    head_bytes: float
    """fp32 logits of the LM head, alive during its forward and backward."""
    model_flops: float
    """FLOPs of one iteration without recomputation (for TFLOPS, MFU convention)."""

    @property
    def layers(self) -> int:
        return len(self.fwd_s)

    def truncated(self, layers: int) -> TrainCosts:
        """The same model cut to its first ``layers`` layers (small instances, brute force)."""
        k = layers
        scale = k / self.layers
        return replace(
            self,
            fwd_s=self.fwd_s[:k],
            bwd_s=self.bwd_s[:k],
            act_bytes=self.act_bytes[:k],
            ckpt_bytes=self.ckpt_bytes[:k],
            ws_bytes=self.ws_bytes[:k],
            params=self.params[:k],
            model_flops=self.model_flops * scale,
        )


@cache
def _data() -> dict[str, Any]:
    text = resources.files("scalesched.memplan").joinpath("data", _SOURCE).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def provenance() -> dict[str, Any]:
    prov: dict[str, Any] = dict(_data()["provenance"])
    return prov


def _resolve(name: str, known: list[str], field: str) -> str:
    """Exact name, else case-insensitive, else the name before its first dash (``l4``), else
    a unique case-insensitive prefix (``a10``)."""
    if name in known:
        return name
    low = {k.lower(): k for k in known}
    if name.lower() in low:
        return low[name.lower()]
    hits = [k for k in known if k.split("-")[0].lower() == name.lower()]
    if len(hits) != 1:
        hits = [k for k in known if k.lower().startswith(name.lower())]
    if len(hits) == 1:
        return hits[0]
    raise InputError("memplan", field, f"unknown {field} {name!r}; known: {', '.join(known)}")


def resolve_model(name: str) -> str:
    return _resolve(name, list(_data()["forward_s"]), "model")


def resolve_gpu(name: str) -> str:
    return _resolve(name, list(GPU_TYPES), "gpu")


def hardware(
    gpu: str,
    *,
    pcie_gbs: float | None = None,
    nvme_read_gbs: float | None = None,
    nvme_write_gbs: float | None = None,
    cpu_mem_gb: float | None = None,
    nvme_gb: float | None = None,
    cpu_adam_gbs: float | None = None,
) -> Hardware:
    """The documented defaults for ``gpu``'s server, with any given figure overridden."""
    g = GPU_TYPES[resolve_gpu(gpu)]
    values = {
        "pcie_gbs": pcie_gbs if pcie_gbs is not None else PCIE_GBS.get(g.name, DEFAULT_PCIE_GBS),
        "nvme_read_gbs": nvme_read_gbs if nvme_read_gbs is not None else NVME_READ_GBS,
        "nvme_write_gbs": nvme_write_gbs if nvme_write_gbs is not None else NVME_WRITE_GBS,
        "cpu_mem_gb": cpu_mem_gb if cpu_mem_gb is not None else CPU_MEM_GB,
        "nvme_gb": nvme_gb if nvme_gb is not None else NVME_GB,
        "cpu_adam_gbs": cpu_adam_gbs if cpu_adam_gbs is not None else CPU_ADAM_GBS,
    }
    for field, v in values.items():
        if not (v > 0 and math.isfinite(v)):
            raise InputError("memplan", field, f"must be a positive number, got {v}")
    return Hardware(
        gpu=g.name,
        gpu_mem_bytes=g.memory_gb * 1e9 * GPU_USABLE_FRACTION,
        hbm_gbs=g.mem_bw_gbs,
        tflops=g.tflops,
        pcie_gbs=values["pcie_gbs"],
        nvme_read_gbs=values["nvme_read_gbs"],
        nvme_write_gbs=values["nvme_write_gbs"],
        cpu_mem_bytes=values["cpu_mem_gb"] * 1e9,
        nvme_bytes=values["nvme_gb"] * 1e9,
        cpu_adam_gbs=values["cpu_adam_gbs"],
    )


def _interp(grid: list[int], values: list[float], n: int) -> float:
    """Linear interpolation; past the grid, the last segment's slope (as perf.py does)."""
    if n <= grid[-1]:
        return float(np.interp(n, grid, values))
    slope = (values[-1] - values[-2]) / (grid[-1] - grid[-2])
    return values[-1] + slope * (n - grid[-1])


def train_costs(
    model: str, gpu: str, batch: int, seq: int, hw: Hardware | None = None
) -> TrainCosts:
    """The cost model of one iteration of ``model`` on one ``gpu`` at ``batch`` x ``seq``."""
    if batch < 1:
        raise InputError("memplan", "batch", f"must be >= 1, got {batch}")
    if seq < 1:
        raise InputError("memplan", "seq", f"must be >= 1, got {seq}")
    mname = resolve_model(model)
    hw = hw if hw is not None else hardware(gpu)
    data = _data()
    table = data["forward_s"][mname][hw.gpu]
    shape = data["shapes"][mname]
    m = MODELS[mname]
    grid = [int(n) for n in data["grid_tokens"]]
    n = batch * seq
    h, ffn, vocab, layers = m.hidden, shape["ffn"], shape["vocab"], m.layers
    gemm = _interp(grid, table["gemm_s"], n)
    other = _interp(grid, table["other_s"], n)
    emb = _interp(grid, table["emb_s"], n)
    # causal attention: QK^T and PV, 2 x 2*b*s^2*h FLOPs halved by the mask
    attn_flops = 2.0 * batch * seq * seq * h
    attn = attn_flops / (hw.tflops * 1e12 * PREFILL_ATTN_EFF)
    fwd = gemm + other + attn
    bwd = (
        BWD_MULTIPLE["gemm"] * gemm
        + BWD_MULTIPLE["other"] * other
        + BWD_MULTIPLE["attention"] * attn
    )
    # LM head at the GEMMs' measured FLOP rate: layer GEMM parameters vs vocab x hidden
    head_dim = h // m.heads
    layer_gemm_params = 2 * h * h + 2 * h * m.kv_heads * head_dim + 3 * h * ffn
    head_fwd = gemm * (vocab * h) / layer_gemm_params
    params_total = m.params_b * 1e9
    sbh = float(n * h)
    act = ACT_BYTES_PER_SBH * sbh
    ckpt = CKPT_BYTES_PER_SBH * sbh
    ws = 4.0 * n * ffn + 2.0 * sbh  # gate/up output gradients + the input gradient passed down
    lm_params = params_total - 2 * vocab * h  # without embedding and LM head
    model_flops = 6.0 * (lm_params + vocab * h) * n + 3.0 * attn_flops * layers

    def per_layer(x: float) -> tuple[float, ...]:
        return (x,) * layers

    return TrainCosts(
        model=mname,
        batch=batch,
        seq=seq,
        hw=hw,
        fwd_s=per_layer(fwd),
        bwd_s=per_layer(bwd),
        act_bytes=per_layer(act),
        ckpt_bytes=per_layer(ckpt),
        ws_bytes=per_layer(ws),
        params=per_layer(params_total / layers),
        emb_fwd_s=emb,
        emb_bwd_s=BWD_MULTIPLE["embedding"] * emb,
        head_fwd_s=head_fwd,
        head_bwd_s=BWD_MULTIPLE["lm_head"] * head_fwd,
        head_bytes=4.0 * n * vocab,
        model_flops=model_flops,
    )
