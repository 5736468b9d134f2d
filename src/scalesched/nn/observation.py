"""A decision as the padded arrays a learned policy reads: the one encoding used by
training (the Gymnasium environment) and by acting (``NetworkScheduler``)."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import SERVER_DIMS, SERVER_FEATURES, Decision
from scalesched.predict.lengths import OutputLengths

OBSERVED_TOKENS: dict[str, float | None] = {"estimate": None, "p90": 0.9}
"""The output length a network's decisions are costed at, by name: ``estimate`` (the
role's static estimate, as the cost model and eft use) or ``p90`` (the shipped predictor's
90th percentile from the call's signals, as tail uses). A network reads what it was
trained on: checkpoints record it (``observed_tokens``)."""


def observed_lengths(observed_tokens: str) -> OutputLengths | None:
    """The predicted lengths a network observing ``observed_tokens`` needs (None for the
    estimate); ``ValueError`` naming the known values otherwise."""
    if observed_tokens not in OBSERVED_TOKENS:
        known = ", ".join(OBSERVED_TOKENS)
        raise ValueError(f"observed_tokens must be one of {known}, got {observed_tokens!r}")
    level = OBSERVED_TOKENS[observed_tokens]
    return None if level is None else OutputLengths(level)


def observed(decision: Decision, lengths: OutputLengths | None) -> Decision:
    """The decision a network reads: as built, or for an LLM call the same state re-costed
    at its predicted output length (the cost model's finish, wait and execution columns and
    the task's length feature all follow it)."""
    if lengths is None or decision.task.kind != "llm":
        return decision
    return decision.at_output_tokens(lengths.tokens(decision.task))


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
