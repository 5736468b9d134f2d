"""Structured Representation Regularization (SRR) for the attention feature.

Why: as the cluster grows, the cross-attention averages over more servers and the attention
feature's distribution drifts away from what the actor head saw in training (smaller variance,
changed correlations). SRR pins the feature's *batch statistics* to a fixed target while
training, so the actor learns on a representation whose scale and structure are less tied to N:

* decorrelation: squared off-diagonal entries of the batch correlation matrix (dimensions
  carry separate information instead of one direction dominating), averaged over the
  d(d-1) pairs (``decorrelation_norm="pairs"``, the original) or summed and divided by d
  (``"dim"``, VICReg's scaling). With "pairs" the term's gradient is d-1 times smaller, and
  at d = 64 and equal weights it was about 1/200 of the policy loss's: inert (issue 9);
* KL: per dimension, KL(N(mu_j, var_j) || N(0, 1)) = 0.5 * (var + mu^2 - 1 - log var),
  averaged over dimensions (each dimension centred, unit variance).

``total = decorrelation_weight * decorrelation + kl_weight * kl`` is added to the RL loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor

__all__ = ["SrrConfig", "SrrLosses", "feature_stats", "srr_losses"]


@dataclass(frozen=True)
class SrrConfig:
    """Weights of the two SRR terms."""

    enabled: bool = True
    """When False, ``total`` is a zero tensor (terms are still computed, detached, for logs)."""
    decorrelation_weight: float = 0.01
    """Weight of the mean squared off-diagonal correlation."""
    kl_weight: float = 0.01
    """Weight of the mean per-dimension Gaussian KL to N(0, 1)."""
    decorrelation_norm: Literal["pairs", "dim"] = "pairs"
    """Divide the summed squared off-diagonal correlations by d(d-1) or by d."""
    eps: float = 1e-5
    """Added to variances before division / log, so constant dimensions stay finite."""


class SrrLosses(NamedTuple):
    """The weighted total (to add to the loss) and the raw terms (to log)."""

    total: Tensor
    decorrelation: Tensor
    kl: Tensor


def _check(features: Tensor) -> None:
    if features.dim() != 2:
        raise ValueError(f"features must be (B, d), got shape {tuple(features.shape)}")


def _correlation(centred: Tensor, var: Tensor, eps: float) -> Tensor:
    """(d, d) batch correlation from centred features and biased per-dimension variances."""
    cov = centred.T @ centred / centred.shape[0]
    std = torch.sqrt(var + eps)
    return cov / (std[:, None] * std[None, :])


def _mean_sq_offdiag(corr: Tensor, norm: str = "pairs") -> Tensor:
    d = corr.shape[0]
    if d < 2:
        return corr.new_zeros(())
    offdiag = corr.square().sum() - corr.diagonal().square().sum()
    return offdiag / (d * (d - 1) if norm == "pairs" else d)


def srr_losses(features: Tensor, cfg: SrrConfig) -> SrrLosses:
    """SRR terms of a (B, d) feature batch; B == 1 has no batch statistics and gives zeros.

    Statistics are biased (divide by B), the usual choice for batch-norm-like targets.
    """
    _check(features)
    zero = features.new_zeros(())
    if features.shape[0] < 2:
        return SrrLosses(zero, zero, zero)
    features = features.float() if features.dtype in (torch.float16, torch.bfloat16) else features
    mu = features.mean(dim=0)
    centred = features - mu
    var = centred.square().mean(dim=0)
    decorrelation = _mean_sq_offdiag(_correlation(centred, var, cfg.eps), cfg.decorrelation_norm)
    kl = (0.5 * (var + mu.square() - 1.0 - torch.log(var + cfg.eps))).mean()
    if not cfg.enabled:
        return SrrLosses(zero, decorrelation.detach(), kl.detach())
    total = cfg.decorrelation_weight * decorrelation + cfg.kl_weight * kl
    return SrrLosses(total, decorrelation, kl)


@torch.no_grad()
def feature_stats(features: Tensor, eps: float = 1e-5) -> dict[str, float]:
    """Scalar summaries of a (B, d) feature batch for logging drift across cluster sizes.

    ``mean``: average of per-dimension means; ``var``: average per-dimension (biased) variance;
    ``mean_abs_offdiag_corr``: mean |correlation| over dimension pairs. With B == 1 only
    ``mean`` is defined; the other two are reported as 0.
    """
    _check(features)
    x = features.detach().float()
    mu = x.mean(dim=0)
    if x.shape[0] < 2:
        return {"mean": float(mu.mean()), "var": 0.0, "mean_abs_offdiag_corr": 0.0}
    centred = x - mu
    var = centred.square().mean(dim=0)
    corr = _correlation(centred, var, eps)
    d = corr.shape[0]
    offdiag = (
        (corr.abs().sum() - corr.diagonal().abs().sum()) / (d * (d - 1))
        if d > 1
        else corr.new_zeros(())
    )
    return {
        "mean": float(mu.mean()),
        "var": float(var.mean()),
        "mean_abs_offdiag_corr": float(offdiag),
    }
