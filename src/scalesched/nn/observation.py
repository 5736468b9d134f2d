"""A decision as the padded arrays a learned policy reads: the one encoding used by
training (the Gymnasium environment) and by acting (``NetworkScheduler``)."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import SERVER_DIMS, SERVER_FEATURES, Decision


def observation(
    decision: Decision, max_servers: int, server_dim: int = SERVER_FEATURES
) -> dict[str, np.ndarray]:
    """A decision as the arrays a learned policy reads, servers padded to ``max_servers``:
    the one encoding used by training (the Gym environment) and by acting
    (``NetworkScheduler``). ``server_dim``: the first that many server features (a network
    trained without the cache features reads ``BASE_SERVER_FEATURES``)."""
    n = decision.n_servers
    if n > max_servers:
        raise ValueError(f"cluster has {n} servers, more than max_servers={max_servers}")
    if server_dim not in SERVER_DIMS:
        raise ValueError(f"server_dim must be one of {SERVER_DIMS}, got {server_dim}")
    servers = np.zeros((max_servers, server_dim), dtype=np.float32)
    servers[:n] = decision.server_features[:, :server_dim]
    mask = np.zeros(max_servers, dtype=np.int8)
    mask[:n] = decision.mask
    return {
        "task": decision.task_features.astype(np.float32),
        "servers": servers,
        "mask": mask,
        "n_servers": np.array([n], dtype=np.int64),
    }
