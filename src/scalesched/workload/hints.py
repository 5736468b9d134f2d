"""Observable hints: what a real system could read off a request before running it.

In a real deployment a request's output length is not known in advance, but what the
prompt asks for says something about it (a length-prediction classifier, the user's
"summarise in a sentence" or "write the whole module"). Our workload draws each task's true
output tokens and external latency and hides them from schedulers; this module gives every
realised task a **difficulty hint**, an observable number with a documented, noisy relation
to that hidden truth:

* LLM task: ``hint = ln(output_tokens / output_tokens_est) + HINT_SIGMA * z``
* tool task with an external-latency estimate > 0:
  ``hint = ln((ext_latency + 0.01) / (ext_latency_est + 0.01)) + HINT_SIGMA * z``
* otherwise ``0.0``,

with ``z`` standard normal. The hint is 0 when the task looks typical for its role, positive
when it looks longer. Its strength is measured in docs/tail.md (Spearman correlation of
hint and true tokens).

The noise comes from a generator of its own, spawned from the realisation's generator
(``Generator.spawn``, which does not advance it): every other draw, and so every run of
every existing policy, is bit-identical to what it was before hints existed.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

HINT_SIGMA = 0.6
"""Standard deviation of the hint's noise in log units (a factor of about 1.8 either way)."""
MAX_HINT = 50.0
"""Largest magnitude of a hint read from a file (a log ratio: e^50 is beyond any length)."""
_EXT_FLOOR = 0.01
"""Seconds added to true and estimated external latency before the ratio (latencies may be
0)."""


def hint_rng(rng: np.random.Generator) -> np.random.Generator:
    """A generator for the hints of one realisation, independent of ``rng``'s stream and
    leaving its state untouched."""
    try:
        return rng.spawn(1)[0]
    except TypeError:  # a generator not seeded through a SeedSequence: key on its state
        digest = hashlib.blake2b(repr(rng.bit_generator.state).encode(), digest_size=8)
        return np.random.default_rng(int.from_bytes(digest.digest(), "little"))


def llm_hint(output_tokens: int, output_tokens_est: int, rng: np.random.Generator) -> float:
    """The difficulty hint of an LLM task (0 when there is no estimate to compare with)."""
    if output_tokens <= 0 or output_tokens_est <= 0:
        return 0.0
    z = float(rng.standard_normal())
    return math.log(output_tokens / output_tokens_est) + HINT_SIGMA * z


def tool_hint(ext_latency: float, ext_latency_est: float, rng: np.random.Generator) -> float:
    """The difficulty hint of a tool task: about its external latency (0 without one)."""
    if ext_latency_est <= 0.0:
        return 0.0
    z = float(rng.standard_normal())
    ratio = (ext_latency + _EXT_FLOOR) / (ext_latency_est + _EXT_FLOOR)
    return math.log(ratio) + HINT_SIGMA * z
