"""The SCALE actor's forward pass in a few numpy operations, for acting one decision at a time.

Why: at batch 1 the PyTorch network spends most of its ~0.3 ms in dispatch over a dozen
small layers, not in arithmetic (docs/benchmarks.md, "SCALE policy decision latency"). This
module reads the weights of a trained :class:`~scalesched.nn.scale_net.ScaleNet` once and
computes the same logits with the algebra regrouped so that no (N, d) x (d, d) product is
formed: the work that grows with N is the first server layer, its tanh and three thin
products. Training keeps the PyTorch network; this path is for acting only (no critic, no
gradients) and is tested equal to it (tests/nn/test_nn_fast.py).

The regrouping (d = d_model, H heads of width dh, h_i = z_i W2 + b2 the server embedding with
z_i = tanh(x_i W1 + b1), q = query(t), q_j its head-j slice, W_kj the head-j columns of the
key projection):

* attention score of head j on server i: ``(h_i W_kj + b_kj) . q_j / sqrt(dh)``
  ``= z_i (W2 W_kj q_j) + const_j``: one (N, d) x (d, H) product instead of the (N, d) keys;
* attended value of head j: ``sum_i w_ij (h_i W_vj + b_vj) = (sum_i w_ij z_i) W2 W_vj + ...``
  because each head's weights sum to one: one (H, N) x (N, d) product instead of the values;
* pointer logit: ``(W_p f + b_p) . (h_i W_r + b_r) / sqrt(d) = z_i (W2 W_r (W_p f + b_p))``
  ``+ const``: one (N, d) x (d, 1) product once the attention feature f is known.

With the optional server self-attention the embedding h is no longer affine in z, so the
layer runs as written (in numpy) and the products above read h directly.

Weights are folded in float64 and stored as float32; the forward runs in float32, as the
network does, so the logits differ from it by rounding only (about 1e-6 of their scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from scalesched.nn.common import MASKED_LOGIT
from scalesched.nn.scale_net import ScaleNet

__all__ = ["FastScaleActor"]

Array = np.ndarray


def _linear(layer: nn.Module) -> tuple[Array, Array]:
    """(in, out) weight and (out,) bias of a ``nn.Linear`` as float64 arrays."""
    assert isinstance(layer, nn.Linear)
    weight = layer.weight.detach().to(torch.float64).numpy().T.copy()
    bias = layer.bias.detach().to(torch.float64).numpy().copy()
    return weight, bias


# ufunc reductions rather than the ``mean``/``max``/``sum`` methods, whose Python wrappers
# cost more than the arithmetic on these small arrays.
_add, _maximum = np.add.reduce, np.maximum.reduce


def _layer_norm(x: Array, norm: tuple[Array, Array, float]) -> Array:
    gamma, beta, eps = norm
    inv_width = 1.0 / x.shape[-1]
    centred = x - _add(x, axis=-1, keepdims=True) * inv_width
    var = _add(centred * centred, axis=-1, keepdims=True) * inv_width
    return centred * (gamma / np.sqrt(var + eps)) + beta


def _norm_params(layer: nn.Module) -> tuple[Array, Array, float]:
    assert isinstance(layer, nn.LayerNorm)
    return (
        layer.weight.detach().to(torch.float64).numpy().copy(),
        layer.bias.detach().to(torch.float64).numpy().copy(),
        float(layer.eps),
    )


def _softmax_rows(scores: Array, axis: int) -> Array:
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@dataclass(frozen=True)
class _SelfAttention:
    """Weights of the optional server self-attention layer (see ``_ServerSelfAttention``)."""

    qkv: tuple[Array, Array]
    out: tuple[Array, Array]
    norm1: tuple[Array, Array, float]
    ffn_in: tuple[Array, Array]
    ffn_out: tuple[Array, Array]
    norm2: tuple[Array, Array, float]
    n_heads: int

    def __call__(self, h: Array) -> Array:
        """(B, N, d) -> (B, N, d); every server is real (acting never pads)."""
        batch, n, d = h.shape
        heads, dh = self.n_heads, d // self.n_heads
        qkv = h @ self.qkv[0] + self.qkv[1]
        q, k, v = (
            qkv[..., i * d : (i + 1) * d].reshape(batch, n, heads, dh).transpose(0, 2, 1, 3)
            for i in range(3)
        )
        weights = _softmax_rows(q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh), axis=-1)
        attended = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, n, d)
        h = _layer_norm(h + attended @ self.out[0] + self.out[1], self.norm1)
        hidden = np.tanh(h @ self.ffn_in[0] + self.ffn_in[1])
        return _layer_norm(h + hidden @ self.ffn_out[0] + self.ffn_out[1], self.norm2)


class FastScaleActor:
    """The pointer logits of a :class:`ScaleNet`, computed in numpy for unpadded decisions.

    Weights are copied at construction: build a new actor after the network's weights change.
    """

    def __init__(self, net: ScaleNet) -> None:
        cfg = net.cfg
        d, heads = cfg.d_model, cfg.n_heads
        dh = d // heads
        self.task_dim, self.server_dim, self.n_heads = cfg.task_dim, cfg.server_dim, heads
        self.last_feature: Array | None = None
        """The (B, d) attention features (the network's ``attn_feature``) of the last call,
        for a scheduler that records them (SRR's feature statistics)."""
        f32 = np.float32
        self._task1 = tuple(a.astype(f32) for a in _linear(net.task_encoder[0]))
        self._task2 = tuple(a.astype(f32) for a in _linear(net.task_encoder[2]))
        self._query = tuple(a.astype(f32) for a in _linear(net.query))
        # Server input: features then the feasibility bit, as the network concatenates them.
        self._server1 = tuple(a.astype(f32) for a in _linear(net.server_encoder[0]))
        w2, b2 = _linear(net.server_encoder[2])
        ssa = net.server_attention
        self._self_attention = (
            None
            if ssa is None
            else _SelfAttention(
                qkv=_linear(ssa.qkv),
                out=_linear(ssa.out),
                norm1=_norm_params(ssa.norm1),
                ffn_in=_linear(ssa.ffn[0]),
                ffn_out=_linear(ssa.ffn[2]),
                norm2=_norm_params(ssa.norm2),
                n_heads=heads,
            )
        )
        self._encoder_out = (w2, b2)  # z -> h, needed only ahead of the self-attention
        # The affine map from the basis rows to h (h = basis @ bw + bb), folded into every
        # product that reads h. Folding is done in float64, then stored as float32.
        bw, bb = (w2, b2) if ssa is None else (np.eye(d), np.zeros(d))
        wk, bk = _linear(net.key)
        wv, bv = _linear(net.value_proj)
        wo, bo = _linear(net.attn_out)
        wp, bp = _linear(net.pointer_query)
        wr, br = _linear(net.pointer_key)
        # heads[i, j] = 1 when feature i belongs to head j: q * heads keeps q_j in column j.
        self._heads = np.kron(np.eye(heads), np.ones((dh, 1))).astype(f32)  # (d, H)
        self._key_w = (bw @ wk / math.sqrt(dh)).astype(f32)  # (d_basis, d)
        self._key_b = ((bb @ wk + bk) / math.sqrt(dh)).astype(f32)  # (d,)
        # Attention output: sum_j pooled_j (bw W_vj) W_oj, one (H * d_basis, d) matrix, plus
        # the constant (bb W_v + b_v) W_o + b_o (each head's weights sum to one).
        self._value_out = np.concatenate(
            [bw @ wv[:, j * dh : (j + 1) * dh] @ wo[j * dh : (j + 1) * dh] for j in range(heads)]
        ).astype(f32)
        self._value_out_b = ((bb @ wv + bv) @ wo + bo).astype(f32)
        self._attn_norm = tuple(
            a.astype(f32) if isinstance(a, np.ndarray) else a for a in _norm_params(net.attn_norm)
        )
        # Pointer: logit_i = (h_i W_r + b_r) . (f W_p + b_p) / sqrt(d)
        #                  = basis_i . (f A + a) + (f c + c0), all from one (d, d_basis + 1)
        # product of the attention feature f.
        side = bw @ wr / math.sqrt(d)  # (d_basis, d)
        const = (bb @ wr + br) / math.sqrt(d)  # (d,)
        self._pointer_w = np.concatenate([wp @ side.T, (wp @ const)[:, None]], axis=1).astype(f32)
        self._pointer_b = np.concatenate([side @ bp, [bp @ const]]).astype(f32)
        self._softmax_scale = (
            None
            if net.softmax_scale is None
            else net.softmax_scale.detach().to(torch.float32).numpy().copy()
        )
        self._prior_weight = (
            None
            if net.prior_log_weight is None
            else np.float32(net.prior_log_weight.detach().exp().item())
        )
        self._prior_feature = cfg.prior_feature
        # Ordering head: MLP([f, mean_i h_i]); the mean embedding is mean(basis) bw + bb.
        self._order: tuple[Array, ...] | None = None
        if net.order_head is not None:
            w1, b1 = _linear(net.order_head[0])
            w2, b2 = _linear(net.order_head[2])
            self._order = tuple(a.astype(f32) for a in (bw, bb, w1, b1, w2, b2))

    def logits(self, task: Array, servers: Array, mask: Array) -> Array:
        """(N,) float32 logits for one task: ``task`` (task_dim,), ``servers`` (N, server_dim)
        as ``Decision.task_features`` / ``server_features``, ``mask`` (N,) bool."""
        return self.logits_batch(task[None], servers[None], mask[None])[0]

    def logits_batch(self, task: Array, servers: Array, mask: Array) -> Array:
        """(B, N) float32 logits for B tasks on the same N servers: ``task`` (B, task_dim),
        ``servers`` (B, N, server_dim), ``mask`` (B, N) bool. Masked servers get
        ``MASKED_LOGIT``."""
        return self.act_batch(task, servers, mask)[0]

    @property
    def orders(self) -> bool:
        """Whether the network has an ordering head."""
        return self._order is not None

    def act(self, task: Array, servers: Array, mask: Array) -> tuple[Array, float | None]:
        """One task's (N,) logits and its ordering head's logit (None without the head)."""
        logits, order = self.act_batch(task[None], servers[None], mask[None])
        return logits[0], None if order is None else float(order[0])

    def act_batch(self, task: Array, servers: Array, mask: Array) -> tuple[Array, Array | None]:
        """``logits_batch``'s (B, N) logits and the ordering head's (B,) logits (None
        without the head)."""
        batch, n, width = servers.shape
        if task.shape != (batch, self.task_dim) or width != self.server_dim:
            raise ValueError(
                f"expected task (B, {self.task_dim}) and servers (B, N, {self.server_dim}), "
                f"got {task.shape} and {servers.shape}"
            )
        x = np.empty((batch, n, width + 1), dtype=np.float32)
        x[..., :width] = servers
        x[..., width] = mask
        basis = x @ self._server1[0]
        basis += self._server1[1]
        np.tanh(basis, out=basis)  # (B, N, d): z; h = z W2 + b2 is never formed
        if self._self_attention is not None:
            w2, b2 = self._encoder_out
            basis = self._self_attention(basis @ w2 + b2).astype(np.float32)

        t = np.tanh(task.astype(np.float32) @ self._task1[0] + self._task1[1])
        t = t @ self._task2[0] + self._task2[1]  # (B, d)
        q = t @ self._query[0] + self._query[1]
        per_head = q[:, :, None] * self._heads  # (B, d, H): q_j in column j
        scores = basis @ (self._key_w @ per_head)  # (B, N, H)
        scores += (self._key_b @ per_head)[:, None, :]
        if self._softmax_scale is not None:
            scores *= np.float32(math.log(max(n, 1))) * self._softmax_scale
        scores -= _maximum(scores, axis=1, keepdims=True)
        weights = np.exp(scores, out=scores)
        weights /= _add(weights, axis=1, keepdims=True)
        pooled = weights.transpose(0, 2, 1) @ basis  # (B, H, d_basis)
        attended = pooled.reshape(batch, -1) @ self._value_out + self._value_out_b
        feature = _layer_norm(t + attended, self._attn_norm)  # type: ignore[arg-type]
        self.last_feature = feature
        pointer = feature @ self._pointer_w + self._pointer_b  # (B, d_basis + 1)
        logits = (basis @ pointer[:, :-1, None])[..., 0]
        logits += pointer[:, -1:]
        if self._prior_weight is not None:
            prior = servers[..., self._prior_feature]
            if not np.isfinite(prior).all():  # as the network: NaN -> 0, +-inf -> +-max
                prior = np.nan_to_num(prior.astype(np.float32), nan=0.0)
            logits -= self._prior_weight * prior
        logits = np.where(mask, logits, np.float32(MASKED_LOGIT))
        if self._order is None:
            return logits, None
        bw, bb, w1, b1, w2, b2 = self._order
        pooled = _add(basis, axis=1) * np.float32(1.0 / n) @ bw + bb  # (B, d): mean of h
        hidden = np.tanh(np.concatenate([feature, pooled], axis=1) @ w1 + b1)
        return logits, (hidden @ w2 + b2)[:, 0]
