"""Token-length distributions from the Splitwise traces."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload.tokens import PROVENANCE, TOKEN_DISTS, TokenDist, get_token_dist

N = 20_000


def test_keys_and_summary():
    assert set(TOKEN_DISTS) == {"code_prompt", "code_output", "conv_prompt", "conv_output"}
    assert "Splitwise" in PROVENANCE["source"]
    assert TOKEN_DISTS["code_prompt"].count == 8819 and TOKEN_DISTS["conv_prompt"].count == 19366
    for d in TOKEN_DISTS.values():
        assert d.median == d.quantile(0.5)
        assert d.quantile(0.0) <= d.median <= d.mean * 3 and d.quantile(1.0) >= d.mean
    assert TOKEN_DISTS["conv_output"].quantile(1.0) == 1000.0


@pytest.mark.parametrize("name", sorted(TOKEN_DISTS))
def test_samples_match_quantiles(name):
    d = TOKEN_DISTS[name]
    rng = np.random.default_rng(42)
    s = np.array([d.sample(rng, lo=0) for _ in range(N)])
    # KS-style band: the sample p-quantile lies between the stored (p -/+ 1.5%) quantiles
    # (4 standard errors at N = 20000), widened by 1 for rounding to integers.
    for p in np.linspace(0.02, 0.98, 49):
        got = float(np.quantile(s, p))
        assert d.quantile(p - 0.015) - 1 <= got <= d.quantile(p + 0.015) + 1, (p, got)
    assert s.min() >= round(d.quantile(0)) and s.max() <= round(d.quantile(1))
    assert abs(s.mean() - d.mean) <= 0.05 * d.mean


def test_sample_scale_and_clip():
    d = TOKEN_DISTS["conv_prompt"]
    rng = np.random.default_rng(0)
    s = [d.sample(rng, scale=0.5, lo=50, hi=300) for _ in range(2000)]
    assert min(s) == 50 and max(s) == 300
    a = [d.sample(np.random.default_rng(7)) for _ in range(3)]
    b = [d.sample(np.random.default_rng(7), scale=2.0) for _ in range(3)]
    assert all(abs(y - 2 * x) <= 1 for x, y in zip(a, b, strict=True))
    assert d.sample(rng, scale=0.0) == 1


def test_quantile_interpolation_and_errors():
    d = TokenDist("t", [float(i) for i in range(101)], mean=50.0)
    assert d.quantile(0.255) == pytest.approx(25.5) and d.median == 50.0
    assert d.quantile(0.995) == pytest.approx(99.5) and d.quantile(1.0) == 100.0
    with pytest.raises(InputError) as e:
        d.quantile(1.5)
    assert e.value.field == "q"
    with pytest.raises(InputError):
        TokenDist("t", [3.0, 2.0] + [5.0] * 99, mean=1.0)
    with pytest.raises(InputError) as e:
        get_token_dist("nope", "workload.yaml")
    assert e.value.source == "workload.yaml" and "conv_prompt" in str(e.value)
    assert get_token_dist("code_output") is TOKEN_DISTS["code_output"]
