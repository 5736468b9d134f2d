"""SRR: near zero on whitened features, large on correlated / shifted ones, NaN-free."""

from __future__ import annotations

import math

import pytest
import torch

from scalesched.nn import SrrConfig, feature_stats, srr_losses

torch.set_num_threads(1)


def gaussian(batch: int = 4096, dim: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed))


def test_whitened_uncorrelated_features_give_near_zero_terms() -> None:
    losses = srr_losses(gaussian(), SrrConfig())
    assert float(losses.decorrelation) < 1e-2
    assert float(losses.kl) < 1e-2
    assert float(losses.total) < 1e-3


def test_strongly_correlated_features_give_large_decorrelation() -> None:
    x = gaussian()
    shared = x[:, :1]
    correlated = shared + 0.1 * x  # every dimension ~ the same signal
    assert float(srr_losses(correlated, SrrConfig()).decorrelation) > 0.2


def test_shifted_and_scaled_features_give_large_kl() -> None:
    x = 3.0 + 5.0 * gaussian()
    kl = float(srr_losses(x, SrrConfig()).kl)
    expected = 0.5 * (25.0 + 9.0 - 1.0 - math.log(25.0))
    assert kl == pytest.approx(expected, rel=0.05)
    assert float(srr_losses(0.1 * gaussian(), SrrConfig()).kl) > 1.0  # collapsed variance


def test_total_is_weighted_sum_and_disabled_gives_zero_total_but_logs_terms() -> None:
    x = (2.0 + gaussian(batch=256, dim=8)).requires_grad_(True)
    cfg = SrrConfig(decorrelation_weight=0.3, kl_weight=0.7)
    on = srr_losses(x, cfg)
    torch.testing.assert_close(on.total, 0.3 * on.decorrelation + 0.7 * on.kl)
    on.total.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0

    off = srr_losses(x, SrrConfig(enabled=False))
    assert float(off.total) == 0.0 and not off.total.requires_grad
    torch.testing.assert_close(off.decorrelation, on.decorrelation.detach())
    torch.testing.assert_close(off.kl, on.kl.detach())


@pytest.mark.parametrize("features", [torch.randn(1, 8), torch.ones(64, 8), torch.randn(64, 1)])
def test_degenerate_batches_are_finite(features: torch.Tensor) -> None:
    features.requires_grad_(True)
    losses = srr_losses(features, SrrConfig())
    assert all(torch.isfinite(t) for t in losses)
    if features.shape[0] == 1:
        assert all(float(t) == 0.0 for t in losses)
    if losses.total.requires_grad:  # B == 1 gives constant zeros, nothing to differentiate
        losses.total.backward()
        assert features.grad is not None and torch.isfinite(features.grad).all()
    stats = feature_stats(features)
    assert all(math.isfinite(v) for v in stats.values())


def test_feature_stats() -> None:
    stats = feature_stats(2.0 + 3.0 * gaussian())
    assert set(stats) == {"mean", "var", "mean_abs_offdiag_corr"}
    assert stats["mean"] == pytest.approx(2.0, abs=0.05)
    assert stats["var"] == pytest.approx(9.0, rel=0.05)
    assert stats["mean_abs_offdiag_corr"] < 0.05
    x = gaussian()
    assert feature_stats(x[:, :1] + 0.1 * x)["mean_abs_offdiag_corr"] > 0.9
    one = feature_stats(torch.full((1, 4), 5.0))
    assert one == {"mean": 5.0, "var": 0.0, "mean_abs_offdiag_corr": 0.0}


def test_rejects_non_matrix_features() -> None:
    with pytest.raises(ValueError, match=r"\(B, d\)"):
        srr_losses(torch.randn(8), SrrConfig())
