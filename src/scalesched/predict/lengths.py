"""The output length an LLM call is costed at: a level of the shipped predictor's
distribution over its output tokens (or its mean), from the call's observable signals.

``tail`` costs every placement at the p90 (docs/tail.md); a network trained with
``observed_tokens: p90`` reads its decisions re-costed at the same length
(:func:`scalesched.nn.observation.observed`). Both ask :class:`OutputLengths`, so the length
is computed in one place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalesched.cluster.tables import MODEL_INDEX
from scalesched.decision.features import TaskRequest
from scalesched.kernel.requests import task_request
from scalesched.predict.features import (
    PATTERN_NAMES,
    ROLE_NAMES,
    token_baseline,
    token_inputs,
)
from scalesched.predict.metrics import predicted_mean
from scalesched.predict.model import QUANTILES, QuantilePredictor, default_predictor
from scalesched.sim.compiled_run import TokenHeadSpec
from scalesched.workload.instance import WorkflowInstance

TOKEN_MEMO_SIZE = 1 << 16
"""Output-token answers remembered before starting afresh (a bound on memory over a long
run; a few bytes each)."""


def task_signal(task: TaskRequest) -> tuple[Any, ...]:
    """Every field of a task the tokens head reads (``token_inputs``, ``token_baseline``)."""
    return (
        task.kind,
        task.model,
        task.role,
        task.pattern,
        task.prompt_tokens,
        task.output_tokens_est,
        task.difficulty_hint,
        task.cpu_work,
        task.ext_latency_est,
    )


def token_quantiles(predictor: QuantilePredictor, task: TaskRequest) -> np.ndarray:
    """(1, Q) predicted output-token quantiles of an LLM task."""
    return np.exp(predictor.tokens(token_inputs(task)) + token_baseline(task))


class OutputLengths:
    """The predicted output length of LLM tasks at ``level`` (a quantile of
    :data:`QUANTILES`, or None for the predicted mean), remembered per task signal: a pure
    function of the predictor, the level and the task's observable fields, so copies may
    share one."""

    def __init__(self, level: float | None, predictor: QuantilePredictor | None = None) -> None:
        if level is not None and level not in QUANTILES:
            raise ValueError(f"level must be one of {QUANTILES}, got {level}")
        self.level = level
        self.predictor = predictor or default_predictor()
        self.memo: dict[tuple[Any, ...], int] = {}
        self._head_spec: TokenHeadSpec | None = None

    def tokens(self, task: TaskRequest) -> int:
        """The output length (at least 1 token) the cost model is asked about for ``task``."""
        key = task_signal(task)
        tokens = self.memo.get(key)
        if tokens is None:
            if len(self.memo) >= TOKEN_MEMO_SIZE:
                self.memo.clear()
            q = token_quantiles(self.predictor, task)
            value = predicted_mean(q) if self.level is None else q[:, QUANTILES.index(self.level)]
            tokens = self.memo[key] = max(1, int(round(float(value[0]))))
        return tokens

    def head_spec(self) -> TokenHeadSpec | None:
        """What the compiled core needs to compute ``tokens`` itself (``sim/_core/
        token_head.hpp``), one object for the life of this one; None at the predicted
        mean, which stays here."""
        if self.level is None:
            return None
        if self._head_spec is None:
            head = self.predictor.tokens
            self._head_spec = TokenHeadSpec(
                weights=head.weights,
                biases=head.biases,
                x_mean=head.x_mean,
                x_std=head.x_std,
                level=QUANTILES.index(self.level),
                roles={name: i for i, name in enumerate(ROLE_NAMES)},
                patterns={name: i for i, name in enumerate(PATTERN_NAMES)},
            )
        return self._head_spec


def workflow_tokens(lengths: OutputLengths, wf: WorkflowInstance) -> list[int]:
    """``lengths.tokens`` of each LLM call of ``wf`` (0 for a tool), for the compiled
    core's whole runs (``sim.compiled_run``), which ask once per workflow. The memo is
    looked up with the call's ``task_signal`` read off the task and workflow, without
    building its ``TaskRequest``; a miss builds the request, checks that its signal is the
    one read, and asks ``tokens``."""
    out = []
    for i, task in enumerate(wf.tasks):
        if task.kind != "llm":
            out.append(0)
            continue
        key = (
            task.kind,
            MODEL_INDEX[task.model or ""],
            task.role,
            wf.pattern,
            task.prompt_tokens,
            task.output_tokens_est,
            task.difficulty_hint,
            task.cpu_work,
            task.ext_latency_est,
        )
        got = lengths.memo.get(key)
        if got is None:
            request = task_request(wf, i, [-1] * len(wf.parents[i]), 0.0, 0.0)
            if task_signal(request) != key:
                raise AssertionError("workflow_tokens: task_signal reads other fields now")
            got = lengths.tokens(request)
        out.append(got)
    return out
