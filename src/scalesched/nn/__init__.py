"""Policy networks for the learned schedulers, and the SRR regulariser.

``build_network("scale", ...)`` gives the size-agnostic SCALE actor-critic;
``build_network("mlp16", ...)`` the fixed-size baseline. Both map the same observation
(``task``, ``servers``, ``mask``, ``n_servers``) to a :class:`PolicyOutput`.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from scalesched.nn.common import MASKED_LOGIT, PolicyOutput, real_server_mask
from scalesched.nn.mlp16 import Mlp16Net
from scalesched.nn.scale_net import ScaleNet, ScaleNetConfig, masked_multihead_attention
from scalesched.nn.srr import SrrConfig, SrrLosses, feature_stats, srr_losses

__all__ = [
    "MASKED_LOGIT",
    "NETWORK_KINDS",
    "Mlp16Net",
    "PolicyNetwork",
    "PolicyOutput",
    "ScaleNet",
    "ScaleNetConfig",
    "SrrConfig",
    "SrrLosses",
    "build_network",
    "count_parameters",
    "feature_stats",
    "masked_multihead_attention",
    "real_server_mask",
    "srr_losses",
]

PolicyNetwork = ScaleNet | Mlp16Net

NETWORK_KINDS: dict[str, str] = {
    "scale": "cross-attention actor-critic with pointer head, any cluster size",
    "mlp16": "fixed-size MLP over exactly 16 servers (baseline)",
}


def build_network(kind: str, task_dim: int, server_dim: int, **cfg: Any) -> PolicyNetwork:
    """Build a policy network by name; ``cfg`` goes to ScaleNetConfig or Mlp16Net."""
    if kind == "scale":
        return ScaleNet(ScaleNetConfig(task_dim=task_dim, server_dim=server_dim, **cfg))
    if kind == "mlp16":
        return Mlp16Net(task_dim, server_dim, **cfg)
    raise ValueError(f"unknown network kind {kind!r}; choose from {sorted(NETWORK_KINDS)}")


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars (parameters with ``requires_grad``)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
