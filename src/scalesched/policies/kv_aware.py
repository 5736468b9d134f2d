"""A production LLM router: load- and KV-aware scoring in the style of the vLLM production
stack and llm-d's scheduler (queue length, running batch and KV-cache usage per engine).

Each feasible engine gets a score in [0, ~3]: the fraction of its admission slots already
queued behind, the fraction of its batch running, and the fraction of its KV cache in use;
a server whose model is not resident pays its load time relative to the task's execution.
Production routers see no cost model, so neither does this one beyond that load penalty:
it balances engines rather than predicting finish times. Tools go to the server with the
fewest placed tools per core.
"""

from __future__ import annotations

import numpy as np

from scalesched.cluster.tables import admission_slots
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class KvAwareScheduler(BaseScheduler):
    name = "kv_aware"
    places_only = True  # sim.compiled_loop: answers with a server only
    compiled_policy = "kv_aware"
    """The compiled core runs whole runs of it itself (``sim.compiled_run``)."""

    def select(self, decision: Decision) -> int:
        return int(np.argmin(np.where(decision.mask, kv_aware_scores(decision), np.inf)))


def kv_aware_scores(decision: Decision) -> np.ndarray:
    """Lower is better; see the module docstring."""
    view, tables, task = decision.view, decision.tables, decision.task
    if task.kind != "llm":
        return (view.tools_in_flight + 1) / tables.cores
    m = task.model
    k = tables.class_or_zero[:, m]
    batch = view.engine_batch[:, m]
    need = max(task.prompt_tokens + task.output_tokens_est, 1)
    slots = admission_slots(tables, need)[k]
    queued = np.maximum(batch + 1 - slots, 0) / slots
    running = np.minimum(batch + 1, slots) / tables.max_batch[k]
    kv_use = np.minimum((view.engine_ctx[:, m] + task.context_tokens) / tables.kv_capacity[k], 1)
    exec_best = float(np.min(decision.exec_s[decision.mask]))
    cold = decision.load_s / max(exec_best, 1e-3)
    return queued + running + kv_use + cold
