"""Fixed-size MLP baseline: the architecture SCALE is compared against.

It reads the task and exactly 16 servers flattened into one vector, so its input layer (and
its output layer, one logit per server slot) is tied to N = 16. It exists to show what breaks
without a size-agnostic design; asking it about any other cluster size is an error.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from scalesched.decision.features import RELATIVE_FINISH_FEATURE
from scalesched.nn.common import MASKED_LOGIT, PolicyOutput, check_observation, layer_init

__all__ = ["Mlp16Net"]


class Mlp16Net(nn.Module):
    """Shared two-layer tanh trunk over ``[task, servers_1..16, feasible_1..16]``.

    Actor and critic are linear heads on the trunk's last hidden layer, which is also returned
    as ``attn_feature`` so SRR and feature logging work the same way as for :class:`ScaleNet`.
    The feasibility bits are inputs for the same reason as in ScaleNet: the value depends on
    how constrained the decision is.
    """

    def __init__(
        self,
        task_dim: int,
        server_dim: int,
        n_servers: int = 16,
        hidden: int = 256,
        heuristic_prior: float = 0.0,
        prior_feature: int = RELATIVE_FINISH_FEATURE,
    ):
        super().__init__()
        if n_servers != 16:
            raise ValueError(f"mlp-16 policy accepts exactly 16 servers, got {n_servers}")
        if task_dim < 1 or server_dim < 1 or hidden < 1:
            raise ValueError("task_dim, server_dim and hidden must be >= 1")
        if not (math.isfinite(heuristic_prior) and heuristic_prior >= 0):
            raise ValueError(f"heuristic_prior must be finite and >= 0, got {heuristic_prior}")
        if heuristic_prior > 0 and not 0 <= prior_feature < server_dim:
            raise ValueError(f"prior_feature must index a server feature, got {prior_feature}")
        self.n_servers = n_servers
        self.task_dim = task_dim
        self.server_dim = server_dim
        in_dim = task_dim + n_servers * (server_dim + 1)
        self.trunk = nn.Sequential(
            layer_init(nn.Linear(in_dim, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
        )
        self.actor = layer_init(nn.Linear(hidden, n_servers), gain=0.01)
        self.critic = layer_init(nn.Linear(hidden, 1), gain=1.0)
        # The same learned eft prior as ScaleNet's (heuristic_prior), so the steady-state
        # baseline starts from the same soft eft as SCALE and the comparison is of networks.
        self.prior_feature = prior_feature
        self.prior_log_weight: nn.Parameter | None = (
            nn.Parameter(torch.tensor(math.log(heuristic_prior))) if heuristic_prior > 0 else None
        )

    def forward(
        self,
        task: Tensor,
        servers: Tensor,
        mask: Tensor,
        n_servers: Tensor,
        need_value: bool = True,
    ) -> PolicyOutput:
        """Same contract as :meth:`ScaleNet.forward`; every row must have exactly 16 servers.

        Extra padding columns beyond 16 are accepted (sliced off) and get MASKED_LOGIT, so
        ``logits`` keeps the input width.
        """
        check_observation(task, servers, mask, n_servers)
        n = self.n_servers
        wrong = n_servers != n
        if bool(wrong.any()):
            got = int(n_servers[wrong][0].item())
            raise ValueError(f"mlp-16 policy accepts exactly 16 servers, got {got}")
        width = servers.shape[1]
        if width < n:
            raise ValueError(f"mlp-16 policy accepts exactly 16 servers, got {width}")
        feasible = mask[:, :n]
        x = torch.cat(
            [task, servers[:, :n, :].flatten(1), feasible.to(servers.dtype)],
            dim=-1,
        )
        feature = self.trunk(x)
        scores = self.actor(feature)
        if self.prior_log_weight is not None:
            prior = servers[:, :n, self.prior_feature]
            scores = scores - self.prior_log_weight.exp() * prior.nan_to_num(0.0)
        logits = scores.masked_fill(~feasible, MASKED_LOGIT)
        if width > n:
            logits = torch.nn.functional.pad(logits, (0, width - n), value=MASKED_LOGIT)
        if not need_value:  # acting only: skip the critic
            return PolicyOutput(
                logits=logits, value=logits.new_zeros(logits.shape[0]), attn_feature=feature
            )
        value = self.critic(feature).squeeze(-1)
        return PolicyOutput(logits=logits, value=value, attn_feature=feature)
