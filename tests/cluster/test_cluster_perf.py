"""The LLM cost model: derived tables, tp rule, monotonicity, GPU ordering."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scalesched.cluster import perf
from scalesched.cluster.perf import (
    GPU_TYPES,
    KV_MEMORY_FRACTION,
    MIN_KV_TOKENS,
    MODELS,
    engine_perf,
    provenance,
    tensor_parallel_degree,
)
from scalesched.errors import InputError


def _engines():
    for model in MODELS:
        for gpu in GPU_TYPES:
            for gpus in (1, 2, 4, 8):
                tp = tensor_parallel_degree(model, gpu, gpus)
                if tp == gpus:
                    yield engine_perf(model, gpu, tp)


ENGINES = list(_engines())


def test_catalogue_keys():
    assert set(MODELS) == {"phi-2", "llama-2-7b", "codellama-34b", "llama-2-70b"}
    assert set(GPU_TYPES) == {"H100-80G", "A100-80G", "A40-48G", "L40S-48G", "L4-24G"}
    assert {g for g, t in GPU_TYPES.items() if t.measured} == {"H100-80G", "A100-80G", "A40-48G"}
    assert MODELS["llama-2-7b"].kv_bytes_per_token == 2 * 32 * 32 * 128 * 2
    assert MODELS["llama-2-70b"].kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    prov = provenance()
    assert (
        "7d47513" in prov["kernel_profiles"]
        and prov["script"] == "scripts/derive/derive_llm_perf.py"
    )


def test_published_vocab_fits_the_profiled_lm_head():
    """The profiled LM head is the published vocabulary padded (Llama 2: 32000 -> 32768)."""
    raw = json.loads((Path(perf.__file__).parent / "data" / "llm_perf.json").read_text())
    for name, m in MODELS.items():
        assert 0 < m.vocab_size <= raw["models"][name]["vocab"], name
        assert m.context_window in (2048, 4096, 16384), name
    assert MODELS["llama-2-7b"].context_window == 4096 < MODELS["codellama-34b"].context_window


@pytest.mark.parametrize("eng", ENGINES, ids=repr)
def test_monotone(eng):
    prev = 0.0
    for b in range(0, 1100):
        t = eng.decode_step_s(b, 1000)
        assert t >= prev
        prev = t
    for b in (1, 8, 64, 256):
        ctx = [eng.decode_step_s(b, c) for c in (0, 10, 1000, 100_000, 1_000_000)]
        assert ctx == sorted(ctx) and ctx[-1] > ctx[0]
    prev = 0.0
    for n in list(range(1, 5000, 7)) + [8192, 16384, 32768]:
        t = eng.prefill_s(n)
        assert t >= prev and math.isfinite(t)
        prev = t
    assert eng.decode_step_s(0, 0) == 0.0 and eng.prefill_s(0) == 0.0


def test_gpu_ordering():
    order = ["H100-80G", "A100-80G", "A40-48G", "L4-24G"]
    for model in ("phi-2", "llama-2-7b"):
        engs = [engine_perf(model, g, 1) for g in order]
        for metric in (
            lambda e: e.decode_step_s(1, 500),
            lambda e: e.decode_step_s(64, 64 * 500),
            lambda e: e.prefill_s(1000),
        ):
            times = [metric(e) for e in engs]
            assert times == sorted(times) and len(set(times)) == 4, (model, times)
    # L40S (more bandwidth and FLOPS than A40) must beat A40
    for model in MODELS:
        for tp in (1, 2, 4, 8):
            try:
                a40, l40s = engine_perf(model, "A40-48G", tp), engine_perf(model, "L40S-48G", tp)
            except InputError:
                continue
            assert l40s.decode_step_s(1, 0) < a40.decode_step_s(1, 0)
            assert l40s.prefill_s(2000) < a40.prefill_s(2000)


def test_sanity_numbers():
    h100 = engine_perf("llama-2-7b", "H100-80G", 1)
    a100 = engine_perf("llama-2-7b", "A100-80G", 1)
    table = json.loads((Path(perf.__file__).parent / "data" / "llm_perf.json").read_text())
    grid = table["grid_tokens"]
    linear = table["linear_s"]["llama-2-7b"]
    # The lookups return the measured kernel times of the derived table, exactly.
    assert h100.decode_step_s(1, 0) == pytest.approx(linear["H100-80G"]["1"][0], rel=1e-9)
    n = 1024
    measured = linear["A100-80G"]["1"][grid.index(n)]
    assert a100.prefill_s(n) == pytest.approx(
        measured + a100.prefill_attn_s_per_token2 * n * n, rel=1e-9
    )
    # And they are physical: a batch-1 decode step streams the 13.5 GB of weights at
    # 3.35 TB/s (4.0 ms) with kernel overhead on top (measured 5.6 ms) ...
    assert 1.0 < h100.decode_step_s(1, 0) / (13.5e9 / 3.35e12) < 1.5
    # ... and a 1000-token prefill runs 2 x 6.7e9 x 1000 FLOPs at 55-70% of 312 TFLOPS.
    mfu = 2 * 6.7e9 * 1000 / (a100.prefill_s(1000) * 312e12)
    assert 0.55 < mfu < 0.70, mfu
    assert h100.load_s(8.0) == pytest.approx(13.5 / 8.0)
    assert h100.load_s(0.0) == math.inf


def test_tp_rule():
    tpd = tensor_parallel_degree
    assert tpd("llama-2-70b", "H100-80G", 1) is None
    assert tpd("llama-2-70b", "A100-80G", 2) == 2
    assert tpd("llama-2-70b", "H100-80G", 8) == 2
    assert tpd("llama-2-70b", "L4-24G", 4) is None
    assert tpd("llama-2-70b", "L4-24G", 8) == 8
    assert tpd("llama-2-70b", "A40-48G", 4) == 4
    assert tpd("codellama-34b", "L4-24G", 4) == 4
    assert tpd("codellama-34b", "L4-24G", 2) is None
    assert tpd("codellama-34b", "A40-48G", 4) == 2
    assert tpd("codellama-34b", "H100-80G", 4) == 1
    for model in MODELS:
        for gpu in GPU_TYPES:
            assert tpd(model, gpu, 0) is None
            assert tpd("phi-2", gpu, 8) == 1
            assert tpd("llama-2-7b", gpu, 4) == 1
            for gpus in range(1, 17):
                tp = tpd(model, gpu, gpus)
                if tp is None:
                    continue
                assert tp <= min(gpus, 8) and tp & (tp - 1) == 0
                eng = engine_perf(model, gpu, tp)
                assert eng.kv_capacity_tokens >= MIN_KV_TOKENS
                mem = tp * GPU_TYPES[gpu].memory_gb * 1e9 * KV_MEMORY_FRACTION
                m = MODELS[model]
                assert eng.kv_capacity_tokens == int((mem - m.weight_bytes) // m.kv_bytes_per_token)
                if tp > 1:  # smallest: half the tp does not fit
                    assert tpd(model, gpu, tp // 2) is None


def test_engine_errors():
    with pytest.raises(InputError) as e:
        engine_perf("gpt-9", "H100-80G", 1)
    assert e.value.field == "model" and "llama-2-7b" in str(e.value)
    with pytest.raises(InputError) as e:
        tensor_parallel_degree("llama-2-7b", "TPU", 1)
    assert e.value.field == "gpu_type"
    with pytest.raises(InputError) as e:
        engine_perf("llama-2-70b", "H100-80G", 1)
    assert e.value.field == "tp" and "does not fit" in str(e.value)
    with pytest.raises(InputError) as e:
        engine_perf("phi-2", "H100-80G", 2)
    assert e.value.field == "tp"
    assert engine_perf("llama-2-7b", "H100-80G", 1) is engine_perf("llama-2-7b", "H100-80G", 1)
