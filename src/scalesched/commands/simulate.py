"""``scalesched simulate``'s steps: the cache options checked, one run of the simulator
with a progress bar, and its report (a table, or one JSON object).

The command in ``scalesched.cli`` declares the options and calls these in order; every
figure comes from ``scalesched.runs.setup.run``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalesched.commands.common import (
    console,
    err_console,
    kv_policy_mode,
    logits_cache_mode,
    metrics_table,
    progress_bar,
    tool_cache_on,
    window_size,
)
from scalesched.errors import print_json, require_completed, require_finite
from scalesched.kernel.metrics import steady_state_note


@dataclass(frozen=True)
class CacheModes:
    """The cache options of a run, checked: ``kv`` None is off; ``logits`` True (on),
    False (measure), None (off)."""

    kv: str | None
    tool_cache: bool
    logits: bool | None


def cache_modes(
    kv_policy: str, tool_cache: str, logits_cache: str, tool_repeat: float
) -> CacheModes:
    """Every cache option checked, in the order the command line reports them."""
    from scalesched.workload.repeats import check_repeat_probability

    modes = CacheModes(
        kv=kv_policy_mode(kv_policy),
        tool_cache=tool_cache_on(tool_cache),
        logits=logits_cache_mode(logits_cache),
    )
    check_repeat_probability(tool_repeat)
    return modes


@dataclass(frozen=True)
class Recording:
    """What the run keeps beside its metrics: a streamed trace file, the records a Gantt
    chart needs, and the measured window (None: the default share)."""

    trace: Path | None
    gantt: Path | None
    warmup: int | None
    cooldown: int | None


def simulate_run(
    setup: Any, scheduler: Any, caches: CacheModes, recording: Recording, label: str, show: bool
) -> Any:
    """One simulator run of ``setup``, its progress shown when ``show``; refuses a run
    whose figures are not finite or that did not complete."""
    from scalesched.runs.setup import run
    from scalesched.runs.windows import default_cooldown

    n_jobs = len(setup.jobs)
    gantt = recording.gantt
    with progress_bar(show, n_jobs, label, unit="workflows") as tick:
        result = run(
            setup,
            scheduler,
            record_trace=gantt is not None,  # the chart needs every record; a trace does not
            trace_path=recording.trace if gantt is None else None,
            on_workflow_done=tick,
            warmup=None  # found from the responses (MSER)
            if recording.warmup is None
            else window_size(recording.warmup, n_jobs, "--warmup", lambda n: 0),
            cooldown=window_size(recording.cooldown, n_jobs, "--cooldown", default_cooldown),
            kv_policy=caches.kv,
            tool_cache=caches.tool_cache,
            logits_cache=caches.logits,
        )
    require_finite(result.metrics, "simulate")
    require_completed(result.metrics, "simulate")
    return result


def show_progress(progress: bool, as_json: bool) -> bool:
    """Progress when asked for and not JSON: a bar on a terminal, plain lines elsewhere
    (:class:`~scalesched.commands.common.progress_bar` decides which)."""
    return progress and not as_json


def report_simulation(metrics: dict[str, Any], title: str, as_json: bool) -> None:
    """The metrics as one JSON object, or as the table with a note when the run was off
    steady state."""
    if as_json:
        print_json(metrics)
        return
    console.print(metrics_table(title, metrics))
    if metrics.get("world_note"):
        err_console.print(f"note: {metrics['world_note']}")
    if not metrics["steady_state"]:
        err_console.print(f"note: {steady_state_note(metrics)}")


def simulate_auto(
    run_at: Callable[[int], Any],
    n_servers: int,
    arrivals: str,
    precision: float,
    max_workflows: int | None,
) -> Any:
    """``--workflows auto``: ``run_at`` at doubling lengths until the run is steady and its
    mean's batch-means interval is within ``precision`` (``scalesched.runs.length``); one
    plain line per length on stderr. The last run is the answer; its metrics say how many
    workflows it took and whether the precision was reached."""
    from scalesched.runs.length import Attempt, check_steady_arrivals, grow, span_in_responses

    check_steady_arrivals(arrivals)
    last: dict[str, Any] = {}

    def attempt_at(n: int) -> Attempt:
        result = run_at(n)
        last["result"] = result
        m = result.metrics
        return Attempt(
            n,
            float(m["avg_response_time_s"]),
            float(m["avg_response_time_ci_s"]) if m["avg_response_time_ci_s"] >= 0 else math.inf,
            bool(m["steady_state"]),
            bool(m["overloaded"]),
            span_in_responses(m),
        )

    def say(line: str) -> None:
        err_console.print(line, markup=False, highlight=False)

    final, tried = grow(attempt_at, n_servers, precision, cap=max_workflows, say=say)
    metrics = last["result"].metrics
    metrics["workflows_auto"] = ",".join(str(a.workflows) for a in tried)
    metrics["precision_target"] = precision
    metrics["precision_reached"] = final.precise(precision)
    return last["result"]
