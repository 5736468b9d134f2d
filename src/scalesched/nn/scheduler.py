"""A trained network as a scheduler: the same contract as every heuristic.

It reads only ``Decision.task_features``, ``server_features`` and ``mask``, so it runs in
the simulator, the Gymnasium environment and the Ray runtime alike, at any N.

A SCALE network acts through :class:`~scalesched.nn.fast.FastScaleActor` (the same logits in
a few numpy operations, about 5x faster at batch 1) unless attention features are recorded;
:class:`BatchedNetworkScheduler` also scores every task of a decision instant in one pass.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from scalesched.decision.actions import Place, workflow_order
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.errors import InputError
from scalesched.nn import PolicyNetwork, build_network
from scalesched.nn.common import MASKED_LOGIT, PolicyOutput, obs_to_tensors
from scalesched.nn.fast import FastScaleActor
from scalesched.nn.observation import (
    OBSERVED_TOKENS,
    observation,
    observed,
    observed_lengths,
)
from scalesched.nn.scale_net import ScaleNet
from scalesched.nn.srr import feature_stats


class CandidateSet(Protocol):
    """Which servers a network may choose for a decision (e.g.
    :class:`scalesched.policies.bounded.ScoreMargin`): applied to its scores, after the
    network has read the decision as it was trained to."""

    def allowed(self, decision: Decision) -> np.ndarray:
        """(N,) bool: the servers the network may choose."""
        ...

    def reset(self, seed: int) -> None:
        """A new run starts."""
        ...


class NetworkScheduler(BaseScheduler):
    """Placement by a policy network: sampled from its distribution (the policy PPO trained,
    seeded by ``reset``) or greedy (argmax).

    Sampling is the default because a trained policy may rely on randomisation, e.g. to
    spread load over identical servers whose features tie; greedy then breaks every tie
    towards the lowest index and piles work on one server.

    With ``fast`` (the default) a SCALE network's logits come from a numpy copy of its
    weights taken here (:class:`FastScaleActor`): rebuild the scheduler after training the
    network further; any other network kind acts through PyTorch. ``record_features``
    keeps each decision's attention feature (the numpy path's, equal to the network's up
    to float32 rounding), for SRR's statistics. ``observed_tokens``: the output length
    its decisions are costed at (:data:`~scalesched.nn.observation.OBSERVED_TOKENS`), the
    one it was trained on. ``candidates``: the servers it may choose among (None: every
    feasible one); the network still reads every server, so its scores are the ones it was
    trained to give, and the servers outside the set are masked out of its choice.
    """

    places_only = True  # sim.compiled_loop: a server, or a Place with its order

    def __init__(
        self,
        network: PolicyNetwork,
        name: str = "scale",
        record_features: bool = False,
        greedy: bool = False,
        fast: bool = True,
        observed_tokens: str = "estimate",
        candidates: CandidateSet | None = None,
    ) -> None:
        self.network = network.eval()
        self.candidates = candidates
        self.observed_tokens = observed_tokens
        self._lengths = observed_lengths(observed_tokens)
        self.name = name
        self.greedy = greedy
        self._fast_actor: FastScaleActor | None = (
            FastScaleActor(network) if fast and isinstance(network, ScaleNet) else None
        )
        self.record_features = record_features
        self.server_dim = network_server_dim(network)
        """Server features the network reads: the first columns of ``server_features``
        (``BASE_SERVER_FEATURES`` for networks trained without the cache features)."""
        self._generator = torch.Generator().manual_seed(0)
        self._clocks = RaceClocks()
        self.features: dict[int, list[np.ndarray]] = defaultdict(list)
        """Attention features seen, by cluster size (when ``record_features``)."""

    @property
    def actor(self) -> FastScaleActor | None:
        """The numpy acting path, when it applies (a ``ScaleNet``, built with ``fast``);
        None: the PyTorch network acts."""
        return self._fast_actor

    def unsupported_reason(self, n_servers: int) -> str | None:
        fixed = getattr(self.network, "n_servers", None)  # set by fixed-size networks only
        if fixed is not None and fixed != n_servers:
            return f"{self.name} accepts exactly {fixed} servers"
        return None

    @torch.inference_mode()
    def forward(self, decision: Decision) -> PolicyOutput:
        """The network's output for one decision, through the encoding training uses."""
        obs = self.observation(decision)
        batch = {key: value[None] for key, value in obs.items()}
        return self.network(*obs_to_tensors(batch), need_value=False)

    def observation(self, decision: Decision) -> dict[str, np.ndarray]:
        """The arrays the network reads for ``decision`` (training records the same)."""
        return observation(self.observe(decision), decision.n_servers, self.server_dim)

    def observe(self, decision: Decision) -> Decision:
        """``decision`` as this network reads it (:func:`~scalesched.nn.observation.observed`)."""
        return observed(decision, self._lengths)

    def select(self, decision: Decision) -> int | Place:
        if self.actor is not None:  # numpy all the way: no autograd state to switch off
            seen = self.observe(decision)
            logits, order = self.actor.act(
                seen.task_features, seen.server_features[:, : self.server_dim], seen.mask
            )
            if self.record_features:
                self._record(decision.n_servers, self.actor.last_feature, 0)
            return self._ordered(self._choose(self._bounded(logits, decision)), order, decision)
        with torch.inference_mode():
            return self._select_through_torch(decision)

    def _select_through_torch(self, decision: Decision) -> int | Place:
        out = self.forward(decision)  # observes the decision itself
        if self.record_features:
            self._record(decision.n_servers, out.attn_feature.numpy(), 0)
        order = None if out.order_logit is None else float(out.order_logit[0])
        return self._ordered(self._choose(self._bounded(out.logits[0], decision)), order, decision)

    def _record(self, n_servers: int, features: np.ndarray | None, row: int) -> None:
        """Keep one decision's attention feature (``record_features``), by cluster size."""
        assert features is not None
        self.features[n_servers].append(np.array(features[row], dtype=np.float32))

    @staticmethod
    def _ordered(server: int, order: float | None, decision: Decision) -> int | Place:
        """The placement, with a network that has an ordering head, admitted in its
        workflow's arrival order (``fcfs_workflow``'s priority) where the head's logit is
        positive, else in its own arrival order (priority: now). Both are times on one
        clock, so calls ordered either way queue fairly against each other; the call's own
        order as no priority at all would put it behind every prioritised call for good."""
        if order is None:
            return server
        return Place(server, priority=workflow_order(decision) if order > 0 else decision.now)

    def _bounded(
        self, logits: torch.Tensor | np.ndarray, decision: Decision
    ) -> torch.Tensor | np.ndarray:
        """``logits`` with the servers outside the candidate set masked out (as is without
        one)."""
        if self.candidates is None:
            return logits
        allowed = self.candidates.allowed(decision)
        if isinstance(logits, np.ndarray):
            return np.where(allowed, logits, np.float32(MASKED_LOGIT))
        return logits.masked_fill(~torch.from_numpy(allowed), MASKED_LOGIT)

    def _choose(self, logits: torch.Tensor | np.ndarray) -> int:
        """Argmax when greedy, else a draw from the softmax, from this scheduler's generator."""
        if self.greedy:
            return greedy_pick(logits)
        if isinstance(logits, np.ndarray):
            return exponential_race(logits, self._generator, self._clocks)
        probs = torch.softmax(logits.double(), dim=-1)
        return int(torch.multinomial(probs, 1, generator=self._generator).item())

    def reset(self, seed: int) -> None:
        self._generator.manual_seed(seed)
        if self.candidates is not None:
            self.candidates.reset(seed)

    def feature_stats(self) -> dict[int, dict[str, float]]:
        """Mean, variance and mean |off-diagonal correlation| of the features, per N."""
        return {
            n: feature_stats(torch.from_numpy(np.stack(feats)))
            for n, feats in sorted(self.features.items())
            if len(feats) > 1
        }


GREEDY_TIE_RTOL = 1e-5
"""Logits this close (relative to the largest, at least 1) are a tie for greedy placement:
identical servers get equal logits up to float32 rounding, which differs between the numpy
and PyTorch paths and between CPUs (about 1e-7 relative)."""


def greedy_pick(logits: torch.Tensor | np.ndarray) -> int:
    """The lowest-index server among the near-ties for the largest logit, so a greedy run is
    the same through either acting path and on any machine."""
    values = logits.numpy() if isinstance(logits, torch.Tensor) else logits
    top = float(values.max())
    return int(np.argmax(values >= top - GREEDY_TIE_RTOL * max(1.0, abs(top))))


def exponential_race(
    logits: np.ndarray, generator: torch.Generator, clocks: RaceClocks | None = None
) -> int:
    """The server ``torch.multinomial(softmax(logits), 1, generator=generator)`` draws, with
    the same draw from the generator, for a fraction of its cost at batch 1.

    PyTorch draws one sample as ``argmax(p / E)`` with ``E ~ Exp(1)`` per entry (a race of
    exponential clocks; ATen's multinomial fast path); here in log space, ``argmax(logits -
    log E)``, which needs no softmax. Masked entries (``MASKED_LOGIT``) never win, as their
    probability underflows to zero there. ``clocks``: buffers to draw into, reused from
    one decision to the next (the same draws). tests/nn/test_nn_fast.py checks the
    equality against the installed PyTorch.
    """
    return (clocks or RaceClocks()).race(logits, generator)


class RaceClocks:
    """``exponential_race``'s buffers, one per server count: the Exp(1) clocks as a tensor
    and its numpy view, and the race's scores. Allocating them per decision cost 9 of its
    24 µs at N = 256 (measured). Never copied: a copy (``copy.deepcopy``, a pickle) starts
    with none, since a deep copy would part a tensor from its numpy view."""

    def __init__(self) -> None:
        self._by_n: dict[int, tuple[torch.Tensor, np.ndarray, np.ndarray]] = {}

    def race(self, logits: np.ndarray, generator: torch.Generator) -> int:
        n = logits.shape[0]
        buffers = self._by_n.get(n)
        if buffers is None:
            clocks = torch.empty(n, dtype=torch.float64)
            buffers = self._by_n[n] = (clocks, clocks.numpy(), np.empty(n))
        clocks, view, score = buffers
        clocks.exponential_(generator=generator)
        np.log(view, out=score)
        np.subtract(logits, score, out=score)
        return int(score.argmax())

    def __deepcopy__(self, memo: dict[int, object]) -> RaceClocks:
        return RaceClocks()

    def __reduce__(self) -> tuple[type[RaceClocks], tuple[()]]:
        return RaceClocks, ()


class BatchedNetworkScheduler(NetworkScheduler):
    """A network scheduler answering every task waiting at a decision instant at once
    (``select_batch``), scored in one batched pass of the numpy actor.

    Not the default, because it changes what the policy sees: the simulator builds a batch's
    decisions on the same state, so the second task of an instant does not see the first
    one's placement, as it does one at a time (and as the policy was trained). The draws
    (or argmaxes) are made in the batch's order from the same generator.
    """

    def select_batch(self, decisions: list[Decision]) -> list[int | Place]:
        if self.actor is None or len(decisions) == 1:
            return [self.select(d) for d in decisions]
        seen = [self.observe(d) for d in decisions]
        logits, order = self.actor.act_batch(
            np.stack([d.task_features for d in seen]),
            np.stack([d.server_features[:, : self.server_dim] for d in seen]),
            np.stack([d.mask for d in seen]),
        )
        if self.record_features:
            for row, d in enumerate(decisions):
                self._record(d.n_servers, self.actor.last_feature, row)
        orders = [None] * len(decisions) if order is None else [float(x) for x in order]
        triples = zip(logits, orders, decisions, strict=True)
        return [self._ordered(self._choose(self._bounded(row, d)), o, d) for row, o, d in triples]


def network_from_checkpoint(data: dict[str, Any], source: str = "checkpoint") -> PolicyNetwork:
    """The network a checkpoint describes, with its weights; ``InputError`` naming ``source``
    and the field when the kind is unknown, the config does not build, a weight's shape
    does not fit, or a weight is NaN or infinite.

    The network is first built on the ``meta`` device (shapes only, no memory), so a
    config of absurd size fails on the shape check instead of allocating it.
    """
    from scalesched.decision.features import SERVER_DIMS, TASK_FEATURES
    from scalesched.nn import NETWORK_KINDS

    kind = data["network"]
    if not isinstance(kind, str) or kind not in NETWORK_KINDS:
        raise InputError(
            source, "network", f"unknown network kind {kind!r}; known: {', '.join(NETWORK_KINDS)}"
        )
    cfg = data["network_config"]
    if not isinstance(cfg, dict):
        raise InputError(source, "network_config", "expected a mapping of network settings")
    if cfg.get("task_dim") != TASK_FEATURES:
        raise InputError(
            source,
            "network_config.task_dim",
            f"is {cfg.get('task_dim')!r}, but this version's features have width {TASK_FEATURES}",
        )
    if cfg.get("server_dim") not in SERVER_DIMS:
        # a network reads the first server_dim columns: 18 without the cache features
        raise InputError(
            source,
            "network_config.server_dim",
            f"is {cfg.get('server_dim')!r}, but this version's server features have width "
            f"{' or '.join(map(str, SERVER_DIMS))}",
        )
    check_network_config(cfg, source)
    state = data["state_dict"]
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise InputError(source, "state_dict", "expected a mapping of weight tensors")
    try:
        with torch.device("meta"):
            shape_only = build_network(kind, **cfg)
    except (TypeError, ValueError) as exc:
        raise InputError(source, "network_config", _one_line(exc)) from None
    size = sum(p.numel() for p in shape_only.parameters())
    if size > MAX_PARAMETERS:
        raise InputError(
            source,
            "network_config",
            f"describes {size:,} weights, more than the {MAX_PARAMETERS:,} a placement "
            "network may have",
        )
    expected = shape_only.state_dict()
    for name in expected.keys() - state.keys():
        raise InputError(source, f"state_dict.{name}", "missing from the checkpoint")
    for name in state.keys() - expected.keys():
        raise InputError(source, f"state_dict.{name}", f"not a weight of a {kind} network")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise InputError(
                source,
                f"state_dict.{name}",
                f"has shape {tuple(tensor.shape)}, the network needs {tuple(expected[name].shape)}",
            )
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise InputError(source, f"state_dict.{name}", "holds NaN or infinite weights")
    net = build_network(kind, **cfg)
    net.load_state_dict(state)
    check_probe_scores(net, int(cfg["task_dim"]), int(cfg["server_dim"]), source)
    return net


MAX_PARAMETERS = 50_000_000
"""Most weights a checkpoint's network may have (the shipped ones have under 200k)."""
CONFIG_INT_RANGES: dict[str, tuple[int, int]] = {
    "d_model": (1, 4096),
    "n_heads": (1, 256),
    "critic_hidden": (1, 65_536),
    "hidden": (1, 65_536),
    "n_servers": (1, 4096),
    "prior_feature": (0, 4096),
}
"""Ranges of the integer settings a network config may carry, checked before any build."""
MAX_PRIOR_WEIGHT = 1e3
"""Largest ``heuristic_prior`` magnitude (trained ones are a few units)."""
MAX_PROBE_SCORE = 1e6
"""Largest score magnitude a network may give on the probe input: trained networks give
tens; weights that give more are corrupt (1e30 weights give 1e36 scores, or inf)."""
PROBE_SERVERS = 16


def check_network_config(cfg: dict[str, Any], source: str) -> None:
    """Types and ranges of a network config, before anything is built: a config asking
    for an absurd size (``d_model`` 2^30, a million heads) fails here in one line."""
    for key, value in cfg.items():
        field = f"network_config.{key}"
        if key in CONFIG_INT_RANGES:
            lo, hi = CONFIG_INT_RANGES[key]
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InputError(
                    source, field, f"must be an integer in [{lo}, {hi}], got {value!r}"
                )
        elif isinstance(value, float) and not math.isfinite(value):
            raise InputError(source, field, f"must be a finite number, got {value}")
    prior = cfg.get("heuristic_prior", 0.0)
    numeric = isinstance(prior, int | float) and not isinstance(prior, bool)
    if numeric and abs(prior) > MAX_PRIOR_WEIGHT:
        raise InputError(
            source,
            "network_config.heuristic_prior",
            f"must be within +-{MAX_PRIOR_WEIGHT:g}, got {prior}",
        )


@torch.inference_mode()
def check_probe_scores(net: PolicyNetwork, task_dim: int, server_dim: int, source: str) -> None:
    """Score a fixed probe decision (seeded features of unit scale, every server
    feasible) and fail in one line unless every score and the value are finite and of
    sane size: finite weights can still overflow (1e30 times 1e30), and such a network
    would pick servers by NaN comparisons."""
    gen = torch.Generator().manual_seed(0)
    task = torch.randn(1, task_dim, generator=gen)
    servers = torch.randn(1, PROBE_SERVERS, server_dim, generator=gen)
    mask = torch.ones(1, PROBE_SERVERS, dtype=torch.bool)
    out = net(task, servers, mask, torch.tensor([PROBE_SERVERS]), need_value=True)
    for name, scores in (("scores", out.logits), ("value", out.value)):
        worst = float(scores.abs().max()) if scores.numel() else 0.0
        if not math.isfinite(worst) or worst > MAX_PROBE_SCORE:
            raise InputError(
                source,
                "state_dict",
                f"the weights give {'non-finite' if not math.isfinite(worst) else 'huge'} "
                f"{name} ({worst:.3g}) on a probe input: corrupt or not a trained network",
            )


def network_server_dim(network: PolicyNetwork) -> int:
    """The width of the server features ``network`` was built for."""
    cfg = getattr(network, "cfg", None)
    dim = getattr(cfg, "server_dim", None) if cfg is not None else None
    if dim is None:
        dim = getattr(network, "server_dim", None)
    if not isinstance(dim, int):
        raise TypeError(f"{type(network).__name__} does not say its server_dim")
    return dim


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def load_scheduler(
    path: str | Path,
    record_features: bool = False,
    greedy: bool = False,
    name: str | None = None,
    fast: bool = True,
    batched: bool = False,
    candidates: CandidateSet | None = None,
) -> NetworkScheduler:
    """A scheduler from a checkpoint file (see ``scalesched.nn.checkpoint``).

    It is named ``name`` if given, else by the path it was loaded from: a checkpoint's own
    ``metadata.name`` is the config's name (``scale`` for a local run of the paper config),
    and reporting a local run under a shipped policy's name would pass one off as the other
    (the registry, ``scalesched.policies.get_policy``, names the shipped ones).
    ``fast`` and ``batched`` choose the acting path (:class:`NetworkScheduler`,
    :class:`BatchedNetworkScheduler`); ``candidates`` bounds its choices
    (:class:`NetworkScheduler`).
    """
    from scalesched.nn.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    data = load_checkpoint(path)
    network = network_from_checkpoint(data, str(path))
    kind = BatchedNetworkScheduler if batched else NetworkScheduler
    return kind(
        network,
        name=name if name is not None else str(path),
        record_features=record_features,
        greedy=greedy,
        fast=fast,
        observed_tokens=checkpoint_observed_tokens(data, str(path)),
        candidates=candidates,
    )


def checkpoint_observed_tokens(data: dict[str, Any], source: str) -> str:
    """The output length a checkpoint's network was trained to read (``estimate`` for
    checkpoints that do not say); ``InputError`` naming ``source`` and the field otherwise."""
    value = data.get("observed_tokens", "estimate")
    if value not in OBSERVED_TOKENS:
        known = ", ".join(OBSERVED_TOKENS)
        raise InputError(source, "observed_tokens", f"is {value!r}; known: {known}")
    return str(value)
