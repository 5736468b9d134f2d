"""A trained network as a scheduler: the same contract as every heuristic.

It reads only ``Decision.task_features``, ``server_features`` and ``mask``, so it runs in
the simulator, the Gymnasium environment and the Ray runtime alike, at any N.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scalesched.nn import PolicyNetwork, build_network
from scalesched.nn.srr import feature_stats
from scalesched.policies.base import BaseScheduler
from scalesched.policies.features import Decision


class NetworkScheduler(BaseScheduler):
    """Placement by a policy network: sampled from its distribution (the policy PPO trained,
    seeded by ``reset``) or greedy (argmax).

    Sampling is the default because a trained policy may rely on randomisation, e.g. to
    spread load over identical servers whose features tie; greedy then breaks every tie
    towards the lowest index and piles work on one server.
    """

    def __init__(
        self,
        network: PolicyNetwork,
        name: str = "scale",
        record_features: bool = False,
        greedy: bool = False,
    ) -> None:
        self.network = network.eval()
        self.name = name
        self.greedy = greedy
        self.record_features = record_features
        self._generator = torch.Generator().manual_seed(0)
        self.features: dict[int, list[np.ndarray]] = defaultdict(list)
        """Attention features seen, by cluster size (when ``record_features``)."""

    @torch.inference_mode()
    def select(self, decision: Decision) -> int:
        n = decision.n_servers
        out = self.network(
            torch.from_numpy(decision.task_features.astype(np.float32))[None],
            torch.from_numpy(decision.server_features.astype(np.float32))[None],
            torch.from_numpy(np.array(decision.mask, dtype=bool))[None],
            torch.tensor([n]),
            need_value=False,
        )
        if self.record_features:
            self.features[n].append(out.attn_feature[0].numpy().copy())
        if self.greedy:
            return int(torch.argmax(out.logits[0]).item())
        probs = torch.softmax(out.logits[0].double(), dim=-1)
        return int(torch.multinomial(probs, 1, generator=self._generator).item())

    def reset(self, seed: int) -> None:
        self._generator.manual_seed(seed)

    def feature_stats(self) -> dict[int, dict[str, float]]:
        """Mean, variance and mean |off-diagonal correlation| of the features, per N."""
        return {
            n: feature_stats(torch.from_numpy(np.stack(feats)))
            for n, feats in sorted(self.features.items())
            if len(feats) > 1
        }


def network_from_checkpoint(data: dict[str, Any]) -> PolicyNetwork:
    cfg = dict(data["network_config"])
    net = build_network(str(data["network"]), **cfg)
    net.load_state_dict(data["state_dict"])
    return net


def load_scheduler(
    path: str | Path, record_features: bool = False, greedy: bool = False
) -> NetworkScheduler:
    """A scheduler from a checkpoint file (see ``scalesched.train.checkpoint``)."""
    from scalesched.train.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    data = load_checkpoint(path)
    name = str(data.get("metadata", {}).get("name", Path(path).stem))
    return NetworkScheduler(
        network_from_checkpoint(data), name=name, record_features=record_features, greedy=greedy
    )
