"""The training cost model: derived from the profiles, with the documented multiples."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from scalesched.errors import InputError
from scalesched.memplan import costs as cm


def test_backward_is_the_documented_multiple_of_forward() -> None:
    c = cm.train_costs("llama-2-7b", "A100-80G", 4, 2048)
    # bwd = 2 x (gemm + other) + 2.5 x attention, so between 2x and 2.5x the forward
    assert 2.0 * c.fwd_s[0] < c.bwd_s[0] < 2.5 * c.fwd_s[0]
    assert c.head_bwd_s == pytest.approx(2.0 * c.head_fwd_s)


def test_sizes_follow_the_mixed_precision_accounting() -> None:
    c = cm.train_costs("llama-2-7b", "A100-80G", 2, 1024)
    sbh = 2 * 1024 * 4096
    assert c.act_bytes[0] == pytest.approx(34 * sbh)
    assert c.ckpt_bytes[0] == pytest.approx(2 * sbh)
    assert sum(c.params) == pytest.approx(6.7e9)
    assert c.layers == 32


def test_time_grows_with_tokens_and_flops_rate_is_plausible() -> None:
    small = cm.train_costs("llama-2-7b", "H100-80G", 1, 1024)
    big = cm.train_costs("llama-2-7b", "H100-80G", 16, 4096)  # past the profiled 4096 tokens
    assert big.fwd_s[0] > 16 * small.fwd_s[0]
    # a layer's forward cannot beat the GPU's peak FLOPS on its GEMMs (~2 x 200M x tokens)
    flops = 2 * (6.7e9 - 2 * 32768 * 4096) / 32 * 16 * 4096
    assert big.fwd_s[0] > flops / (989e12)


def test_unmeasured_gpu_is_slower_than_its_source_where_it_has_less_bandwidth() -> None:
    a40 = cm.train_costs("llama-2-7b", "A40-48G", 1, 512)
    l4 = cm.train_costs("llama-2-7b", "L4-24G", 1, 512)
    assert l4.fwd_s[0] > a40.fwd_s[0]


def test_names_and_aliases() -> None:
    assert cm.resolve_gpu("l4") == "L4-24G"
    assert cm.resolve_gpu("a100") == "A100-80G"
    assert cm.resolve_model("LLAMA-2-7B") == "llama-2-7b"
    with pytest.raises(InputError, match="unknown gpu 'V100'"):
        cm.resolve_gpu("V100")
    with pytest.raises(InputError, match="unknown model"):
        cm.resolve_model("gpt-5")


def test_overrides_and_bad_values() -> None:
    hw = cm.hardware("H100-80G", pcie_gbs=10.0, cpu_mem_gb=64)
    assert hw.pcie_gbs == 10.0 and hw.cpu_mem_bytes == 64e9
    assert cm.hardware("H100-80G").pcie_gbs == 50.0
    assert cm.hardware("L4-24G").pcie_gbs == 25.0
    with pytest.raises(InputError, match="pcie_gbs"):
        cm.hardware("L4-24G", pcie_gbs=-1.0)
    with pytest.raises(InputError, match="cpu_mem_gb"):
        cm.hardware("L4-24G", cpu_mem_gb=math.nan)
    with pytest.raises(InputError, match="batch"):
        cm.train_costs("llama-2-7b", "L4-24G", 0, 1024)


def test_provenance_names_the_script() -> None:
    assert cm.provenance()["script"] == "scripts/derive/derive_train_costs.py"


def test_committed_table_is_what_the_script_derives(tmp_path: Path) -> None:
    """Provenance: rerunning scripts/derive/derive_train_costs.py reproduces the shipped table."""
    repo = Path(__file__).resolve().parents[2]
    shared = repo.parent / "shared" / "data"
    if not (shared / "llm-profiles").is_dir():
        pytest.skip("reference data not present")
    out = tmp_path / "t.json"
    script = repo / "scripts" / "derive" / "derive_train_costs.py"
    subprocess.run(
        [sys.executable, str(script), str(shared), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    fresh = json.loads(out.read_text())
    shipped = json.loads((repo / "src/scalesched/memplan/data/train_costs.json").read_text())
    for doc in (fresh, shipped):
        doc["provenance"].pop("date")
    assert fresh == shipped
