"""Predictor inputs, built from what a scheduler sees (a ``Decision``), in numpy only.

Two inputs, one per head of a :class:`~scalesched.predict.model.QuantilePredictor`:

* ``token_inputs(task)``: the task alone (kind, model, role, pattern, prompt length, the
  static output estimate, the difficulty hint, CPU work, external-latency estimate);
* ``duration_inputs(decision, servers)``: the task's inputs plus, per candidate server, the
  static server features and the queue state at the decision (the cost model's execution,
  wait, transfer and load estimates, the engine's batch, residency, outstanding work);
  the duration and finish heads both read it.

Each head predicts quantiles of ``ln(truth)`` as an offset from ``ln(baseline)``:
the static output estimate for tokens, the cost model's execution estimate on that server
for durations, its finish estimate for finish times; :func:`token_baseline`,
:func:`duration_baseline` and :func:`finish_baseline` give them. The same
functions feed training and acting, so the two cannot drift apart.
"""

from __future__ import annotations

import math

import numpy as np

from scalesched.cluster.tables import MODEL_NAMES
from scalesched.decision.features import ENGINE_READY, Decision, TaskRequest
from scalesched.workload.patterns import PATTERNS
from scalesched.workload.roles import ROLES

ROLE_NAMES: tuple[str, ...] = tuple(ROLES)
PATTERN_NAMES: tuple[str, ...] = tuple(p for p in PATTERNS if p != "agentic-mix")
"""Realised workflows carry their own pattern; a mix draws from these."""

TASK_INPUTS = 1 + len(MODEL_NAMES) + len(ROLE_NAMES) + 1 + len(PATTERN_NAMES) + 1 + 5
SERVER_INPUTS = 6 + 9
DURATION_INPUTS = TASK_INPUTS + SERVER_INPUTS
STATIC_GROUPS = len(ROLE_NAMES) + 2
"""Rows of the static per-role baseline: one per role, then 'other LLM', then 'tool'."""
_EPS = 1e-3
"""Seconds (or tokens) added before a logarithm: some estimates are 0."""


def task_inputs(task: TaskRequest) -> np.ndarray:
    """(TASK_INPUTS,) one-hots of kind, model, role and pattern (with an 'other' slot each),
    then scaled lengths and the hint."""
    f = np.zeros(TASK_INPUTS)
    f[0] = 1.0 if task.kind == "llm" else 0.0
    i = 1
    if task.model >= 0:
        f[i + task.model] = 1.0
    i += len(MODEL_NAMES)
    r = ROLE_NAMES.index(task.role) if task.role in ROLE_NAMES else len(ROLE_NAMES)
    f[i + r] = 1.0
    i += len(ROLE_NAMES) + 1
    p = PATTERN_NAMES.index(task.pattern) if task.pattern in PATTERN_NAMES else len(PATTERN_NAMES)
    f[i + p] = 1.0
    i += len(PATTERN_NAMES) + 1
    f[i] = math.log1p(task.prompt_tokens) / 8
    f[i + 1] = math.log1p(task.output_tokens_est) / 8
    f[i + 2] = task.difficulty_hint
    f[i + 3] = math.log1p(task.cpu_work)
    f[i + 4] = math.log1p(task.ext_latency_est)
    return f


def token_inputs(task: TaskRequest) -> np.ndarray:
    """(1, TASK_INPUTS): the tokens head's input."""
    return task_inputs(task)[None, :]


def token_baseline(task: TaskRequest) -> float:
    """ln of the static output estimate: the tokens head predicts offsets from it."""
    return math.log(max(task.output_tokens_est, 1))


def duration_inputs(decision: Decision, servers: np.ndarray) -> np.ndarray:
    """(len(servers), DURATION_INPUTS): the task's inputs and each server's state."""
    t, v, task = decision.tables, decision.view, decision.task
    k = len(servers)
    x = np.empty((k, DURATION_INPUTS))
    x[:, :TASK_INPUTS] = task_inputs(task)
    s = TASK_INPUTS
    x[:, s : s + 6] = t.server_static[servers]
    s += 6
    x[:, s] = np.log(decision.exec_s[servers] + _EPS)
    x[:, s + 1] = np.log1p(decision.wait_s[servers])
    x[:, s + 2] = np.log1p(decision.transfer_s[servers])
    x[:, s + 3] = np.log1p(decision.load_s[servers])
    x[:, s + 4] = np.log1p(v.est_work[servers]) / 5
    x[:, s + 5] = np.log1p(v.n_assigned[servers]) / 5
    if task.kind == "llm":
        m = task.model
        x[:, s + 6] = np.log1p(v.engine_batch[servers, m]) / 5
        x[:, s + 7] = v.engine_state[servers, m] == ENGINE_READY
        x[:, s + 8] = np.log1p(v.engine_ctx[servers, m]) / 15
    else:
        x[:, s + 6] = np.log1p(v.tools_in_flight[servers]) / 5
        x[:, s + 7] = v.busy_cores[servers] / t.cores[servers]
        x[:, s + 8] = np.log1p(v.cpu_backlog[servers]) / 5
    return x


def duration_baseline(decision: Decision, servers: np.ndarray) -> np.ndarray:
    """(len(servers),) ln of the cost model's execution estimate on each server."""
    return np.log(decision.exec_s[servers] + _EPS)


def finish_baseline(decision: Decision, servers: np.ndarray) -> np.ndarray:
    """(len(servers),) ln of the cost model's finish estimate (eft's, without the imposed
    delay): the finish head predicts offsets from it."""
    return np.log(decision.finish_s[servers] + _EPS)


def static_group(task: TaskRequest) -> int:
    """The task's row in the static per-role baseline tables."""
    if task.kind != "llm":
        return len(ROLE_NAMES) + 1
    return ROLE_NAMES.index(task.role) if task.role in ROLE_NAMES else len(ROLE_NAMES)
