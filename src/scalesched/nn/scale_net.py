"""SCALE policy network: the task attends over the servers, a pointer head picks one.

Why this shape: the cluster size N changes between training and deployment, so no parameter
may depend on N. The ready task's embedding is the *query* of a cross-attention whose keys and
values are per-server embeddings; every weight acts per server or per task, and N only appears
as the length of the attended set. The pointer head scores each server against the attention
output, so the action space grows with N for free.

Layout (d = ``d_model``)::

    task (B,T) --MLP--> t (B,d) ----------------------------query-----+
    [servers | feasible] (B,N,S+1) --MLP--> h (B,N,d) [--self-attn-->] --keys/values--> MHA
    f = LayerNorm(t + W_o MHA(t; h))                     attention feature (B,d), SRR acts here
    logits_i = (W_p f) . (W_r h_i) / sqrt(d)             pointer head, masked to feasible servers
    value = MLP([f, mean_{i < n} h_i])                   critic (``critic_encoder``: shared)
    order = MLP([f, mean_{i < n} h_i], detached)         ordering head (``ordering_head``)

Every reduction over servers (attention, pooled mean) runs over the *real* servers (index <
``n_servers``), not only the feasible ones: an infeasible server is still part of the cluster
state the critic should see. Padding is zeroed before encoding, so its content never leaks.

The optional ordering head chooses the admission order of the placed call: its workflow's
arrival order (``fcfs_workflow``'s priority) when its logit is positive, the call's own
arrival order otherwise. It reads the placement's representation detached, so learning the
order never moves the placement a checkpoint was validated with.

The feasibility bit of each server is appended to its features: feasibility depends on the task
(memory, model), and without it the critic could not tell how constrained the decision is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from scalesched.decision.features import RELATIVE_FINISH_FEATURE
from scalesched.nn.common import (
    MASKED_LOGIT,
    PolicyOutput,
    check_observation,
    layer_init,
    real_server_mask,
)

__all__ = ["PolicyOutput", "ScaleNet", "ScaleNetConfig", "masked_multihead_attention"]

_REFERENCE_N = 16
"""Cluster size at which scalable softmax starts as plain softmax (s * log(16) = 1)."""

CRITIC_ENCODERS = ("shared", "detached", "own")
ORDER_HIDDEN = 32
"""Hidden width of the ordering head."""


@dataclass(frozen=True)
class ScaleNetConfig:
    """Hyper-parameters of :class:`ScaleNet`; none of them depends on the cluster size."""

    task_dim: int
    """Width of the task feature vector."""
    server_dim: int
    """Width of one server's feature vector (the feasibility bit is appended internally)."""
    d_model: int = 64
    """Width of task/server embeddings and of the attention feature."""
    n_heads: int = 4
    """Heads of the cross-attention (and of the optional server self-attention)."""
    server_self_attention: bool = False
    """Add one post-LN transformer-encoder layer among the real servers before cross-attention."""
    scalable_softmax: bool = False
    """Multiply cross-attention logits by s_h * log(n) (learned s_h per head, n = real servers)."""
    critic_hidden: int = 128
    """Hidden width of the two-layer critic MLP."""
    heuristic_prior: float = 0.0
    """Initial weight of a learned eft prior added to the pointer logits: minus this times
    each server's relative-finish feature (0 at eft's choice). 0: no prior (the paper's
    network). With it the untrained policy is a soft eft, and PPO learns corrections to a
    strong placement instead of discovering one from a uniform start (the runs that start
    uniform swing between 1x and 10x eft on long validation runs)."""
    prior_feature: int = RELATIVE_FINISH_FEATURE
    """Index of the relative-finish feature among the server features."""
    critic_encoder: str = "shared"
    """What the critic reads: ``shared`` (the actor's attention feature and server
    embeddings, trained by both heads: the paper's network), ``detached`` (the same, but the
    value loss does not train them) or ``own`` (its own task and server encoders, pooled by
    mean: a DeepSets critic). Measured on steady-state episodes the value gradient is 30-60x
    the policy gradient, so with a shared encoder the critic, not the policy loss, moves
    the actor's embeddings (docs/training.md, "Why fine-tuning drifted")."""

    ordering_head: bool = False
    """Add the ordering head (see the module doc): a second output choosing between the
    call's own arrival order and its workflow's, trained by ``dagger`` with
    ``learn_order``."""

    def __post_init__(self) -> None:
        if self.task_dim < 1 or self.server_dim < 1:
            raise ValueError(f"task_dim and server_dim must be >= 1, got {self}")
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})"
            )
        if self.critic_hidden < 1:
            raise ValueError(f"critic_hidden must be >= 1, got {self.critic_hidden}")
        if not (math.isfinite(self.heuristic_prior) and self.heuristic_prior >= 0):
            raise ValueError(f"heuristic_prior must be finite and >= 0, got {self.heuristic_prior}")
        if self.heuristic_prior > 0 and not 0 <= self.prior_feature < self.server_dim:
            raise ValueError(f"prior_feature must index a server feature, got {self.prior_feature}")
        if self.critic_encoder not in CRITIC_ENCODERS:
            raise ValueError(
                f"critic_encoder must be one of {CRITIC_ENCODERS}, got {self.critic_encoder!r}"
            )


def masked_multihead_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_valid: Tensor,
    n_heads: int,
    logit_scale: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention over a padded key set, split into ``n_heads`` heads.

    Written by hand (rather than ``nn.MultiheadAttention``) so the logits can be rescaled per
    row and head by scalable softmax before the softmax.

    Args:
        q: (B, Lq, d) projected queries.
        k, v: (B, N, d) projected keys and values.
        key_valid: (B, N) bool, False keys get zero weight; each row needs at least one True.
        n_heads: number of heads; d must be divisible by it.
        logit_scale: optional (B, H) multiplier applied to the logits of each row and head.

    Returns:
        (B, Lq, d) attended values and (B, H, Lq, N) attention weights.
    """
    batch, n_query, d = q.shape
    width = k.shape[1]
    dh = d // n_heads
    qh = q.view(batch, n_query, n_heads, dh).transpose(1, 2)  # (B, H, Lq, dh)
    kh = k.view(batch, width, n_heads, dh).transpose(1, 2)  # (B, H, N, dh)
    vh = v.view(batch, width, n_heads, dh).transpose(1, 2)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(dh)  # (B, H, Lq, N)
    if logit_scale is not None:
        scores = scores * logit_scale[:, :, None, None]
    scores = scores.masked_fill(~key_valid[:, None, None, :], MASKED_LOGIT)
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ vh).transpose(1, 2).reshape(batch, n_query, d)
    return out, weights


class _ServerSelfAttention(nn.Module):
    """One post-LN transformer-encoder layer among the real servers of each row.

    Lets a server's embedding reflect the rest of the cluster (e.g. "I am the only idle GPU")
    while staying permutation-equivariant and N-agnostic. No dropout: it hurts on-policy RL.
    """

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = layer_init(nn.Linear(d_model, 3 * d_model), gain=1.0)
        self.out = layer_init(nn.Linear(d_model, d_model), gain=1.0)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            layer_init(nn.Linear(d_model, 4 * d_model)),
            nn.Tanh(),
            layer_init(nn.Linear(4 * d_model, d_model), gain=1.0),
        )
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, h: Tensor, real: Tensor) -> Tensor:
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        attended, _ = masked_multihead_attention(q, k, v, real, self.n_heads)
        h = self.norm1(h + self.out(attended))
        h = self.norm2(h + self.ffn(h))
        # Padded slots attended to real keys and hold finite junk; zero them for tidiness.
        return h * real[..., None].to(h.dtype)


class ScaleNet(nn.Module):
    """Actor-critic for placing one task on one of N servers, for any N (see module doc)."""

    def __init__(self, cfg: ScaleNetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.task_encoder = nn.Sequential(
            layer_init(nn.Linear(cfg.task_dim, d)),
            nn.Tanh(),
            layer_init(nn.Linear(d, d)),
        )
        self.server_encoder = nn.Sequential(
            layer_init(nn.Linear(cfg.server_dim + 1, d)),
            nn.Tanh(),
            layer_init(nn.Linear(d, d)),
        )
        self.server_attention = (
            _ServerSelfAttention(d, cfg.n_heads) if cfg.server_self_attention else None
        )
        self.query = layer_init(nn.Linear(d, d), gain=1.0)
        self.key = layer_init(nn.Linear(d, d), gain=1.0)
        self.value_proj = layer_init(nn.Linear(d, d), gain=1.0)
        self.attn_out = layer_init(nn.Linear(d, d), gain=1.0)
        self.attn_norm = nn.LayerNorm(d)
        # Scalable softmax (Nakanishi 2025): softmax(s * log(n) * z) keeps attention from
        # flattening as n grows. s starts at 1/log(16), i.e. plain softmax at the training size.
        self.softmax_scale: nn.Parameter | None = (
            nn.Parameter(torch.full((cfg.n_heads,), 1.0 / math.log(_REFERENCE_N)))
            if cfg.scalable_softmax
            else None
        )
        # Pointer head: multiplicative (dot-product) rather than additive tanh, so scoring all
        # N servers is one batched matmul. Gain 0.01 on the query side -> near-uniform start.
        self.pointer_query = layer_init(nn.Linear(d, d), gain=0.01)
        self.pointer_key = layer_init(nn.Linear(d, d), gain=1.0)
        # The eft prior's weight, learned (log-parametrised so it stays positive).
        self.prior_log_weight: nn.Parameter | None = (
            nn.Parameter(torch.tensor(math.log(cfg.heuristic_prior)))
            if cfg.heuristic_prior > 0
            else None
        )
        # The critic's own encoders (critic_encoder="own"): same shapes as the actor's, so
        # its input [t', mean h'] has the width of the shared critic's [f, mean h].
        self.critic_task_encoder: nn.Module | None = None
        self.critic_server_encoder: nn.Module | None = None
        if cfg.critic_encoder == "own":
            self.critic_task_encoder = nn.Sequential(
                layer_init(nn.Linear(cfg.task_dim, d)), nn.Tanh(), layer_init(nn.Linear(d, d))
            )
            self.critic_server_encoder = nn.Sequential(
                layer_init(nn.Linear(cfg.server_dim + 1, d)),
                nn.Tanh(),
                layer_init(nn.Linear(d, d)),
            )
        self.order_head: nn.Sequential | None = None
        if cfg.ordering_head:
            self.order_head = nn.Sequential(
                layer_init(nn.Linear(2 * d, ORDER_HIDDEN)),
                nn.Tanh(),
                layer_init(nn.Linear(ORDER_HIDDEN, 1), gain=0.01),
            )
        self.critic = nn.Sequential(
            layer_init(nn.Linear(2 * d, cfg.critic_hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(cfg.critic_hidden, cfg.critic_hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(cfg.critic_hidden, 1), gain=1.0),
        )

    def encode(
        self, task: Tensor, servers: Tensor, mask: Tensor, n_servers: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Embeddings before the heads.

        Returns:
            attention feature (B, d), server embeddings (B, N, d, zero on padding), real-server
            mask (B, N) and cross-attention weights (B, H, N) (useful to inspect attention
            entropy as N grows).
        """
        check_observation(task, servers, mask, n_servers)
        real = real_server_mask(n_servers, servers.shape[1])
        real_f = real[..., None].to(servers.dtype)
        # masked_fill, not multiply: padding may hold NaN/inf and NaN * 0 is still NaN.
        clean = servers.masked_fill(~real[..., None], 0.0)
        server_in = torch.cat([clean, (mask & real)[..., None].to(servers.dtype)], dim=-1)
        h = self.server_encoder(server_in) * real_f
        if self.server_attention is not None:
            h = self.server_attention(h, real)

        t = self.task_encoder(task)
        scale = None
        if self.softmax_scale is not None:
            log_n = torch.log(n_servers.clamp(min=1).to(t.dtype))
            scale = log_n[:, None] * self.softmax_scale[None, :]  # (B, H)
        attended, weights = masked_multihead_attention(
            self.query(t)[:, None, :],
            self.key(h),
            self.value_proj(h),
            real,
            self.cfg.n_heads,
            logit_scale=scale,
        )
        feature = self.attn_norm(t + self.attn_out(attended[:, 0, :]))
        return feature, h, real, weights[:, :, 0, :]

    def forward(
        self,
        task: Tensor,
        servers: Tensor,
        mask: Tensor,
        n_servers: Tensor,
        need_value: bool = True,
    ) -> PolicyOutput:
        """Score every server for the task and estimate the state value.

        Args:
            task: (B, task_dim) float.
            servers: (B, N, server_dim) float, any content beyond ``n_servers``.
            mask: (B, N) bool, True where the server exists and can run the task.
            n_servers: (B,) long, real server count of each row (>= 1).
        """
        feature, h, real, _ = self.encode(task, servers, mask, n_servers)
        scores = torch.einsum("bd,bnd->bn", self.pointer_query(feature), self.pointer_key(h))
        scores = scores / math.sqrt(self.cfg.d_model)
        if self.prior_log_weight is not None:
            prior = servers[..., self.cfg.prior_feature]
            scores = scores - self.prior_log_weight.exp() * prior.nan_to_num(0.0)
        logits = scores.masked_fill(~(mask & real), MASKED_LOGIT)
        order = None
        if self.order_head is not None:
            order = self.order_head(_pooled_input(feature.detach(), h.detach(), real))[:, 0]

        if not need_value:  # acting only: skip the critic
            value = logits.new_zeros(logits.shape[0])
            return PolicyOutput(logits, value, attn_feature=feature, order_logit=order)
        value = self.critic(self._critic_input(task, servers, mask, feature, h, real))
        return PolicyOutput(logits, value.squeeze(-1), attn_feature=feature, order_logit=order)

    def critic_parameters(self) -> list[nn.Parameter]:
        """Parameters only the value loss trains (all of the critic's unless it is shared)."""
        if self.cfg.critic_encoder == "shared":
            return []
        return [p for name, p in self.named_parameters() if name.startswith("critic")]

    def _critic_input(
        self, task: Tensor, servers: Tensor, mask: Tensor, feature: Tensor, h: Tensor, real: Tensor
    ) -> Tensor:
        """[task summary, mean over real servers of their embeddings], per critic_encoder."""
        if self.critic_server_encoder is not None and self.critic_task_encoder is not None:
            clean = servers.masked_fill(~real[..., None], 0.0)
            server_in = torch.cat([clean, (mask & real)[..., None].to(servers.dtype)], dim=-1)
            h = self.critic_server_encoder(server_in) * real[..., None].to(servers.dtype)
            feature = self.critic_task_encoder(task)
        elif self.cfg.critic_encoder == "detached":
            feature, h = feature.detach(), h.detach()
        return _pooled_input(feature, h, real)


def _pooled_input(feature: Tensor, h: Tensor, real: Tensor) -> Tensor:
    """[feature, mean over real servers of their embeddings]: what the critic and the
    ordering head read."""
    count = real.sum(dim=1).clamp(min=1).to(h.dtype)[:, None]
    pooled = h.sum(dim=1) / count  # h is zero on padding, so this is the real-server mean
    return torch.cat([feature, pooled], dim=-1)
