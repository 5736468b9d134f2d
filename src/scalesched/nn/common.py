"""Pieces shared by every policy network: the output record, masking and initialisation.

All networks take the same observation (``task``, ``servers``, ``mask``, ``n_servers``, batch
first) and return a :class:`PolicyOutput`, so the RL trainer can swap architectures freely.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

MASKED_LOGIT = -1e9
"""Logit given to infeasible servers and padding. Large and negative but *finite*: with
``-inf`` a row's ``log_softmax`` at masked entries is ``-inf`` and entropy / KL terms of PPO turn
into ``0 * -inf = NaN``. ``exp(-1e9 - max)`` underflows to exactly 0, so masked servers are
never sampled. Meant for float32 (in float16 it would overflow to ``-inf``)."""


class PolicyOutput(NamedTuple):
    """What a policy network returns for a batch of decisions."""

    logits: Tensor
    """(B, N) unnormalised scores per server; infeasible / padded servers hold MASKED_LOGIT."""
    value: Tensor
    """(B,) state-value estimate of the critic."""
    attn_feature: Tensor
    """(B, d) the representation the actor reads; SRR regularises its batch statistics."""
    order_logit: Tensor | None = None
    """(B,) a network with an ordering head: the logit of admitting the task in its
    workflow's arrival order (``fcfs_workflow``'s priority) rather than its own; None
    without one."""


def real_server_mask(n_servers: Tensor, width: int) -> Tensor:
    """(B, width) bool, True for index < n_servers: the servers that exist in each row.

    Distinct from the feasibility ``mask``: a real server may be unable to run the task, but it
    still belongs in pooled summaries and attention (it is part of the cluster state).
    """
    return torch.arange(width, device=n_servers.device)[None, :] < n_servers[:, None]


def layer_init(layer: nn.Linear, gain: float = math.sqrt(2.0), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights and constant bias, as in CleanRL's PPO.

    ``sqrt(2)`` suits tanh hidden layers; heads use a small gain (policy: 0.01, so the initial
    policy is near uniform) or 1 (value).
    """
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def check_observation(task: Tensor, servers: Tensor, mask: Tensor, n_servers: Tensor) -> None:
    """Shape checks only (no data-dependent checks, which would force a device sync)."""
    if task.dim() != 2 or servers.dim() != 3:
        raise ValueError(
            f"expected task (B, T) and servers (B, N, S), got {tuple(task.shape)} and "
            f"{tuple(servers.shape)}"
        )
    batch, width = servers.shape[:2]
    if task.shape[0] != batch or tuple(mask.shape) != (batch, width):
        raise ValueError(
            f"batch/width mismatch: task {tuple(task.shape)}, servers {tuple(servers.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    if tuple(n_servers.shape) != (batch,):
        raise ValueError(f"n_servers must have shape ({batch},), got {tuple(n_servers.shape)}")


def obs_to_tensors(obs: dict[str, np.ndarray]) -> tuple[Tensor, ...]:
    """Batched observation arrays (``scalesched.decision.features.observation``, stacked)
    -> the network's (task, servers, mask, n_servers): the one conversion that training
    and acting share."""
    return (
        torch.as_tensor(obs["task"], dtype=torch.float32),
        torch.as_tensor(obs["servers"], dtype=torch.float32),
        torch.as_tensor(obs["mask"]).bool(),
        torch.as_tensor(obs["n_servers"]).reshape(-1).long(),
    )
