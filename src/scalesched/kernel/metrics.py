"""The metrics of one run, from plain arrays: shared by the simulator and the Ray runtime,
so both report the same keys computed the same way.

Steady state (docs/steady-state.md): the first workflows (in arrival order) meet an empty
cluster; how many to leave out is found from the run's own responses by MSER unless the
caller fixes it. The last ``cooldown`` arrivals are a run-out: they keep the cluster loaded
while the measured workflows finish, and are not measured. Response-time figures cover the
measured workflows; the verdict (``measurement_window``) says whether they are a steady
state, and why not, and every mean comes with its batch-means interval.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def packed(buf: array, dtype: type) -> np.ndarray:  # type: ignore[type-arg]
    """A copy of a run's ``array.array`` of measurements as numpy (empty when nothing was
    measured): the simulator collects per-event figures in compact arrays."""
    return np.frombuffer(buf, dtype=dtype).copy() if len(buf) else np.zeros(0, dtype=dtype)


@dataclass(frozen=True, slots=True)
class KVRecord:
    """What a run with KV state (``--kv-policy``) measured of its LLM calls; the per-call
    arrays run in admission order, each call with the index of its workflow."""

    policy: str
    call_jobs: np.ndarray
    prompt_tokens: np.ndarray
    cached_tokens: np.ndarray
    """Per call: prompt tokens whose prefill the prefix cache skipped."""
    ttft_jobs: np.ndarray
    ttft_s: np.ndarray
    """Per call that finished its prefill: seconds from landing on its server to the first
    token (admission wait + prefill)."""
    reentry_agents: np.ndarray
    """Per re-entry (a call that extends an earlier call's context): its agent's id."""
    reentry_jobs: np.ndarray
    reentry_miss: np.ndarray
    """Per re-entry: whether the context it extends was not in its engine's cache."""
    reentry_moved: np.ndarray
    """Per re-entry: whether it was placed on another server than its context (a miss no
    eviction policy can prevent)."""
    evicted_tokens: int
    """Tokens the run evicted from prefix caches (and lost with unloaded engines)."""


@dataclass(frozen=True, slots=True)
class LogitsRecord:
    """What a run measured of its re-sampled branches (``--logits-cache``, module
    ``scalesched.sim.logits_cache``); the per-branch arrays run in finishing order."""

    reuse: bool
    """False: measured only (the cache off), nothing was reused."""
    jobs: np.ndarray
    first: np.ndarray
    """Per branch: index of its group's first path in its workflow (the group's key)."""
    output_tokens: np.ndarray
    repeat_tokens: np.ndarray
    """Per branch: tokens it repeats of its group's first path (0 for the first path)."""
    reused_tokens: np.ndarray
    """Per branch: tokens it did not decode itself (taken from stored logits or ridden)."""
    admitted_s: np.ndarray
    """Per branch: when it was admitted to its engine's batch."""
    finished_s: np.ndarray
    """Per branch: when it produced its last token."""
    peak_tokens: int
    """Most KV tokens the stored logits took at once, all engines together."""
    dropped: int
    """Rows not stored for want of free KV memory."""


def logits_metrics(lg: LogitsRecord, measured: np.ndarray) -> dict[str, float | int]:
    """Branch figures over the measured workflows."""
    keep = measured[lg.jobs] if lg.jobs.size else np.zeros(0, dtype=bool)
    out = float(lg.output_tokens[keep].sum())
    service = lg.finished_s[keep] - lg.admitted_s[keep]
    return {
        "branch_calls": int(keep.sum()),
        "branch_repeat_frac": float(lg.repeat_tokens[keep].sum()) / out if out else 0.0,
        "branch_reused_frac": float(lg.reused_tokens[keep].sum()) / out if out else 0.0,
        "branch_service_mean_s": float(service.mean()) if service.size else 0.0,
        "logits_peak_kv_tokens": int(lg.peak_tokens),
        "logits_dropped": int(lg.dropped),
    }


HOTSPOT_SHARE = 0.9
"""Hotspot agents: re-entered agents that were re-entered more often than at least this
share of the re-entered agents (the top decile; agents with equal counts share a verdict,
so there may be fewer than a tenth, or none when most agents tie at the top)."""


def kv_metrics(kv: KVRecord, measured: np.ndarray) -> dict[str, float | int | str]:
    """The cache keys of ``simulate --json`` over the measured workflows (``measured``:
    bool per workflow); see docs/cache.md for the definitions."""
    calls = measured[kv.call_jobs] if kv.call_jobs.size else np.zeros(0, dtype=bool)
    prompt = float(kv.prompt_tokens[calls].sum())
    ttft = kv.ttft_s[measured[kv.ttft_jobs]] if kv.ttft_jobs.size else np.zeros(0)
    re = measured[kv.reentry_jobs] if kv.reentry_jobs.size else np.zeros(0, dtype=bool)
    agents, miss, moved = kv.reentry_agents[re], kv.reentry_miss[re], kv.reentry_moved[re]
    hot_rate = hot_kept = 0.0
    n_hot = 0
    if agents.size:
        _, inverse, counts = np.unique(agents, return_inverse=True, return_counts=True)
        fewer = np.searchsorted(np.sort(counts), counts, side="left")  # agents re-entered less
        hot = fewer >= HOTSPOT_SHARE * counts.size
        n_hot = int(hot.sum())
        hot_calls = hot[inverse]
        hot_rate = float(miss[hot_calls].mean()) if hot_calls.any() else 0.0
        stayed = hot_calls & ~moved
        hot_kept = float(miss[stayed].mean()) if stayed.any() else 0.0
    return {
        "kv_policy": kv.policy,
        "prefix_hit_rate": float(kv.cached_tokens[calls].sum()) / prompt if prompt > 0 else 0.0,
        "ttft_mean_s": _exact_mean(ttft),
        "ttft_p95_s": _pct(ttft, 95),
        "evicted_tokens": int(kv.evicted_tokens),
        "reentry_miss_rate": float(miss.mean()) if miss.size else 0.0,
        "reentry_moved_rate": float(moved.mean()) if moved.size else 0.0,
        "hotspot_agents": n_hot,
        "hotspot_miss_rate": hot_rate,
        "hotspot_stay_miss_rate": hot_kept,
    }


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What a run measured; every array is per workflow, per task or per server."""

    policy: str
    cluster: str
    response_times: np.ndarray
    """Per workflow; NaN for one that did not complete."""
    lower_bounds: np.ndarray
    """Per workflow: the contention-free lower bound of its response time."""
    makespan_s: float
    gpu_utilisation: np.ndarray
    cpu_utilisation: np.ndarray
    has_gpu: np.ndarray
    queue_delays: np.ndarray
    """Per started task: seconds from landing on its server to starting (any order: the
    metrics depend on the values only)."""
    tasks_completed: int
    model_loads: int
    bytes_moved: float
    decisions: int
    events: int
    wall_s: float
    arrivals: np.ndarray | None = None
    """Per workflow, in the order of ``response_times``; needed for the window metrics."""
    warmup: int | None = 0
    """Workflows (in arrival order) excluded from the metrics as warm-up; None: found from
    the responses (MSER)."""
    cooldown: int = 0
    """The last workflows (in arrival order) excluded as cool-down (arrivals stop)."""
    queue_delay_jobs: np.ndarray | None = None
    """Per entry of ``queue_delays``: the index of its workflow (to drop warm-up tasks)."""
    window_utilisation: tuple[np.ndarray, np.ndarray] | None = None
    """(GPU, CPU) busy fractions per server over the measurement window, when known."""
    in_system_area: float | None = None
    """Workflow-seconds spent in the system during the measurement window."""
    hedged_tasks: int = 0
    """Tasks launched on more than one server (``Hedge``)."""
    extra_server_seconds: float = 0.0
    """Server time of cancelled hedge copies (see ``Simulation.extra_server_seconds``)."""
    deferrals: int = 0
    """Times a scheduler answered ``Defer``."""
    kv: KVRecord | None = None
    """The KV-cache measurements of a run with ``--kv-policy`` (None: engines kept no KV)."""
    tool_cache: tuple[np.ndarray, np.ndarray] | None = None
    """A ``--tool-cache on`` run's hits: (job index, tool-seconds saved) per hit
    (``scalesched.sim.tool_cache``); None: no tool cache."""
    logits: LogitsRecord | None = None
    """The re-sampled branches of a run with ``--logits-cache`` (None: not measured)."""
    replicas: tuple[int, int, int, int, float] | None = None
    """A run whose scheduler asked for replicas (``LoadReplica``): (requests, loads,
    releases, LLM calls that landed on a replica, GPU-seconds the replicas held from load
    start to unload); None: it never asked."""
    any_deployment_bounds: np.ndarray | None = None
    """Per workflow: the world-independent contention-free bound (every call alone on the
    fastest configuration any deployment of the cluster can give its model,
    ``kernel.records.any_deployment_lower_bound``); None: not computed (no keys)."""


MIN_MEASURED_FOR_VERDICT = 40
"""Fewer measured workflows than this are too few to judge steady state (verdict False)."""
NOMINAL_WARMUP_FRACTION = 0.2
"""Where the executors' books (utilisation, workflows in the system) start measuring when
the warm-up is found after the run (MSER): the cut is only known once every response is
in, the books must be read while the run goes."""
TREND_ALPHA = 0.01
"""Two-sided level of the trend test on the kept batch means."""
RATE_ALPHA = 0.01
"""Two-sided level of the rate test (delivered against arrived in the window). With
``TREND_ALPHA`` the two tests share an alpha of 0.02, so long steady runs pass the verdict
at least 95% of the time (measured in docs/steady-state.md)."""
RATE_TOLERANCE = 0.05
"""The delivered rate may differ from the arrived one by this share beyond sampling noise:
a window starts and ends with different numbers of workflows in the system, a difference
that does not grow with the window's length."""


@dataclass(frozen=True, slots=True)
class Window:
    """The measurement window of a run and the steady-state verdict on it."""

    start: float
    end: float
    measured: np.ndarray
    """Bool per workflow: arrived after the warm-up and before the run-out."""
    offered_rate: float
    """Workflows that arrived in the window, per second."""
    throughput: float
    """Workflows that completed in the window, per second."""
    trend: float
    """Mean response of the last quarter of the kept workflows over the first quarter (a
    description; the verdict uses ``trend_p``)."""
    steady: bool
    cut: int = 0
    """Workflows (arrival order) left out as warm-up."""
    cut_method: str = "fixed"
    """``mser`` (found from the responses by ``stats.warmup_cut``: MSER-5 and a 200-batch
    pass), ``nominal`` (some workflow never finished, so none could be searched: the
    nominal fraction) or ``fixed`` (given)."""
    mser_cut: int = 0
    """The warm-up search's cut (``stats.warmup_cut``) over the candidate window (equal to
    ``cut`` when found)."""
    candidates: int = 0
    """Workflows before the run-out: what MSER searched."""
    trend_p: float = 1.0
    """Two-sided p-value of a drift in the kept batch means."""
    mean: float = math.nan
    half_width: float = math.nan
    """95% interval of the mean response by batch means (``scalesched.stats``)."""
    ci_method: str = ""
    reasons: tuple[str, ...] = ()
    """Why the run is not steady, in words a user understands (empty when steady)."""
    overloaded: bool = False
    """Not steady because queues grow (rising responses, or fewer delivered than arrived
    over a window long enough to judge): a longer run cannot fix it."""


def window_bounds(n: int, warmup: int, cooldown: int) -> tuple[int, int]:
    """First and last measured index (arrival order) of ``n`` workflows; at least one."""
    first = min(max(warmup, 0), max(n - 1, 0))
    last = max(first, n - 1 - max(cooldown, 0))
    return first, last


def nominal_warmup(n: int, warmup: int | None) -> int:
    """The warm-up the executors' books use: the given one, or the nominal fraction when it
    is found after the run (None)."""
    return int(round(NOMINAL_WARMUP_FRACTION * n)) if warmup is None else warmup


def measurement_window(
    arrivals: np.ndarray, response_times: np.ndarray, warmup: int | None, cooldown: int = 0
) -> Window:
    """The window between warm-up and run-out, and whether the run was at steady state.

    ``warmup`` None finds it: ``stats.warmup_cut`` on the responses in arrival order, over the
    workflows before the run-out (the last ``cooldown`` arrivals, which keep the cluster
    loaded while the measured workflows finish). The verdict is steady only when all hold
    (docs/steady-state.md): MSER's cut falls in the first half of what it searched; the
    kept batch means show no significant drift up or down; the rate delivered in the
    window matches the rate that arrived in it; and every measured workflow finished."""
    from scalesched import stats

    n = arrivals.size
    order = np.argsort(arrivals, kind="stable")
    measured = np.zeros(n, dtype=bool)
    if n == 0:
        return Window(0.0, 0.0, measured, 0.0, 0.0, 1.0, False, reasons=("no workflows",))
    _, last = window_bounds(n, 0, cooldown)
    series = response_times[order[: last + 1]]
    mser, cut, method = _warmup_cut(series, warmup)
    first, last = window_bounds(n, cut, cooldown)
    measured[order[first : last + 1]] = True
    start, end = float(arrivals[order[first]]), float(arrivals[order[last]])
    span = end - start
    n_measured = int(measured.sum())
    offered, throughput = _rates(arrivals, response_times, start, end, n_measured)
    rt = response_times[order[first : last + 1]]
    trend = _quarter_trend(rt)
    kept = rt[np.isfinite(rt)]
    bm = stats.batch_means(kept)
    trend_p = stats.trend_p_value(bm.means)
    queues_grow = _overloaded(arrivals, response_times, order, cooldown)
    reasons = _verdict_reasons(
        queues_grow=queues_grow,
        n_measured=n_measured,
        unfinished=int(rt.size - kept.size),
        mser=mser,
        candidates=series.size,
        trend_p=trend_p,
        falling=stats.trend_slope(bm.means) < 0,
        rates=_lagged_rates(arrivals, response_times, start, end),
        span=span,
        mean_response=float(kept.mean()) if kept.size else math.nan,
    )
    overloaded = bool(reasons) and queues_grow
    return Window(
        start,
        end,
        measured,
        offered,
        throughput,
        trend,
        not reasons,
        cut=first,
        cut_method=method,
        mser_cut=mser,
        candidates=int(series.size),
        trend_p=trend_p,
        mean=bm.mean,
        half_width=bm.half_width,
        ci_method=bm.method,
        reasons=tuple(reasons),
        overloaded=overloaded,
    )


def _overloaded(
    arrivals: np.ndarray, response_times: np.ndarray, order: np.ndarray, cooldown: int
) -> bool:
    """Whether queues grow over the run, judged from the nominal warm-up on (not from MSER's
    cut, which an overloaded run pushes to its end): over a window spanning at least four
    mean responses, fewer workflows complete than arrive; over a shorter one, responses
    rise significantly. A longer run cannot make such a run steady.

    Rising responses alone do not make an overload where the window is long enough to
    count: a deployment filling slowly, or the arrivals' own swings, raise responses by a
    few percent while every arrival is served (planned hetero-32 at load 0.7, 16,000
    workflows: p = 0.005 on 1 of 5 seeds), and a longer run settles them."""
    from scalesched import stats

    first, last = window_bounds(order.size, nominal_warmup(order.size, None), cooldown)
    idx = order[first : last + 1]
    rt = response_times[idx]
    done = rt[np.isfinite(rt)]
    start, end = float(arrivals[idx[0]]), float(arrivals[idx[-1]])
    if end > start and not (done.size and end - start < 4 * float(done.mean())):
        arrived, offered, delivered = _lagged_rates(arrivals, response_times, start, end)
        return delivered < offered and not _rates_match(arrived, delivered, offered)
    means = stats.batch_means(done).means
    # One-sided: the question is only whether responses rise (the slope's sign is given).
    # Over at most 20 batches the two-sided test missed an overload as plain as `random`
    # on planned hetero-16 at load 0.7 (1.7 workflows/s delivered of 7.4; p = 0.012).
    return stats.trend_slope(means) > 0 and stats.trend_p_value(means) / 2 < TREND_ALPHA


def _lagged_rates(
    arrivals: np.ndarray, response_times: np.ndarray, start: float, end: float
) -> tuple[int, float, float]:
    """Arrivals in ``[start, end - W]`` and completions in ``[start + W, end]`` (W: the mean
    response of the workflows that arrived in the window), as (count, rate, rate).

    Counting completions over the same interval as arrivals is biased whenever the number
    of workflows in the system differs at its two ends: a window that starts soon after an
    empty cluster (a planned deployment has flat responses from its first workflow, so
    MSER cuts little) sees every workflow arrive and only the earlier ones leave. Shifted
    by one mean response, the two counts cover the same workflows in a steady state; in an
    overload the completions fall behind all the same."""
    inside = (arrivals >= start) & (arrivals <= end)
    rt = response_times[inside]
    done = rt[np.isfinite(rt)]
    lag = float(done.mean()) if done.size else 0.0
    span = end - start - lag
    if span <= 0:
        return 0, 0.0, 0.0
    arrived = int(((arrivals >= start) & (arrivals <= end - lag)).sum())
    ends = arrivals + response_times
    completed = int((np.isfinite(ends) & (ends >= start + lag) & (ends <= end)).sum())
    return arrived, arrived / span, completed / span


def _rates(
    arrivals: np.ndarray, response_times: np.ndarray, start: float, end: float, n_measured: int
) -> tuple[float, float]:
    """Workflows per second that arrived in ``[start, end]`` and that completed in it."""
    span = end - start
    if span <= 0:
        return 0.0, 0.0
    ends = arrivals + response_times
    done_in = np.isfinite(ends) & (ends >= start) & (ends <= end)
    return (n_measured - 1) / span, float(done_in.sum()) / span


def _quarter_trend(rt: np.ndarray) -> float:
    """Mean of the last quarter of ``rt`` over the first quarter's (inf when undefined)."""
    q = max(1, rt.size // 4)
    head, tail = rt[:q], rt[-q:]
    ok = np.isfinite(head).all() and np.isfinite(tail).all()
    return float(tail.mean() / head.mean()) if ok and head.mean() > 0 else float("inf")


def _warmup_cut(series: np.ndarray, warmup: int | None) -> tuple[int, int, str]:
    """``stats.warmup_cut`` over ``series`` (0 when a workflow never finished), the cut the
    window uses (MSER's when ``warmup`` is None) and how it was chosen."""
    from scalesched import stats

    finished = bool(np.isfinite(series).all())
    mser = stats.warmup_cut(series) if finished else 0
    if warmup is not None:
        return mser, warmup, "fixed"
    if not finished:
        return mser, nominal_warmup(series.size, None), "nominal"
    return mser, mser, "mser"


def _verdict_reasons(
    *,
    queues_grow: bool,
    n_measured: int,
    unfinished: int,
    mser: int,
    candidates: int,
    trend_p: float,
    falling: bool,
    rates: tuple[int, float, float],
    span: float,
    mean_response: float,
) -> list[str]:
    """The steady-state tests that failed, each said in words (empty: steady)."""
    if n_measured < MIN_MEASURED_FOR_VERDICT:
        return [
            f"only {n_measured} measured workflows (need {MIN_MEASURED_FOR_VERDICT}+): "
            "use more --workflows"
        ]
    reasons: list[str] = []
    arrived, arrived_rate, delivered_rate = rates
    keeps_up = not arrived or _rates_match(arrived, delivered_rate, arrived_rate)
    rising = trend_p < TREND_ALPHA and not falling
    if rising and queues_grow:  # first: an overload is what a user must fix
        reasons.append(
            "response times are still rising across the kept window: queues grow, the load "
            "is above what this policy sustains"
        )
    elif rising:  # served as they come: a slow fill or a swing in the arrivals
        reasons.append(
            f"response times rise across the kept window (p = {trend_p:.2g}) while the "
            "cluster keeps up with the arrivals: a slow fill or a swing in the arrival "
            "rate; run longer"
        )
    elif span > 0 and math.isfinite(mean_response) and span < 4 * mean_response:
        reasons.append(
            f"the measured arrivals span {span:.3g} s, less than 4 mean responses "
            f"({mean_response:.3g} s each): the run is far too short for this cluster; "
            "use --workflows auto or many more workflows"
        )
    if unfinished:
        reasons.append(f"{unfinished} measured workflows never finished")
    if mser > candidates // 2:
        reasons.append(
            f"the warm-up (MSER) ends at workflow {mser} of {candidates}: responses "
            "settle only in the second half of the run; run longer"
        )
    if trend_p < TREND_ALPHA and falling:
        reasons.append(
            "response times are still falling across the kept window (a cold start that "
            "has not ended); run longer"
        )
    if not keeps_up:
        below = delivered_rate < arrived_rate
        reasons.append(
            f"the cluster delivered {delivered_rate:.3g} workflows/s against "
            f"{arrived_rate:.3g} arrived in the window: "
            + (
                "the load is above what this policy sustains, or the run is too short"
                if below
                else "it is still clearing a backlog from the start of the run"
            )
        )
    return reasons


def _rates_match(arrived: int, delivered_rate: float, arrived_rate: float) -> bool:
    """Delivered within ``RATE_TOLERANCE`` plus sampling noise (a two-sided normal bound on
    a Poisson count, at ``RATE_ALPHA``) of what arrived."""
    if arrived_rate <= 0:
        return False
    from scipy import stats as sps

    z = float(sps.norm.ppf(1 - RATE_ALPHA / 2))
    noise = z * math.sqrt(2.0 / max(arrived, 1))
    return abs(delivered_rate / arrived_rate - 1.0) <= RATE_TOLERANCE + noise


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else 0.0


def _exact_mean(a: np.ndarray) -> float:
    """The correctly rounded mean: independent of the order of ``a`` (a streamed run
    collects queue delays as workflows retire, an up-front one by task id)."""
    return math.fsum(a.flat) / a.size if a.size else 0.0  # a.flat: no list of every value


def verdict_keys(window: Window) -> dict[str, float | int | str]:
    """The steady-state verdict and the mean's interval, as ``simulate --json`` keys."""
    return {
        "response_trend": window.trend if np.isfinite(window.trend) else -1.0,
        "trend_p_value": window.trend_p,
        "steady_state": window.steady,
        "steady_reason": "; ".join(window.reasons),
        "overloaded": window.overloaded,
        "avg_response_time_ci_s": window.half_width if np.isfinite(window.half_width) else -1.0,
        "ci_method": window.ci_method,
    }


def response_figures(rt: np.ndarray, lb: np.ndarray) -> dict[str, float]:
    """The response-time keys of ``simulate --json`` over finished workflows' responses
    ``rt`` and their lower bounds ``lb`` (one place, so a study that re-measures a run over
    another window computes them the same way: ``eval.windows``)."""
    mean_rt = float(rt.mean()) if rt.size else 0.0
    mean_lb = float(lb.mean()) if lb.size else 0.0
    # Slowdown: each workflow against its own contention-free bound (the SLO's unit).
    slowdown = rt / np.maximum(lb, 1e-9)
    return {
        "avg_response_time_s": mean_rt,
        "p50_response_time_s": _pct(rt, 50),
        "p95_response_time_s": _pct(rt, 95),
        "p99_response_time_s": _pct(rt, 99),
        "p99_slowdown": _pct(slowdown, 99),
        "mean_lower_bound_s": mean_lb,
        "lower_bound_ratio": mean_rt / mean_lb if mean_lb > 0 else 0.0,
    }


def run_metrics(r: RunRecord) -> dict[str, float | int | str]:
    """The JSON object of ``simulate --json`` (docs/first-run.md lists the keys)."""
    return run_metrics_and_window(r)[0]


def run_metrics_and_window(r: RunRecord) -> tuple[dict[str, float | int | str], Window]:
    """``run_metrics`` and the window it measured (which workflows, the verdict)."""
    done = ~np.isnan(r.response_times)
    arrivals = r.arrivals if r.arrivals is not None else np.zeros(r.response_times.size)
    window = measurement_window(arrivals, r.response_times, r.warmup, r.cooldown)
    measured = window.measured if r.arrivals is not None else np.ones(done.size, dtype=bool)
    fig = response_figures(r.response_times[done & measured], r.lower_bounds[done & measured])
    gpu_u, cpu_u = r.window_utilisation or (r.gpu_utilisation, r.cpu_utilisation)
    per_server = np.where(r.has_gpu, gpu_u, cpu_u)
    qd = r.queue_delays
    if r.queue_delay_jobs is not None and r.arrivals is not None:
        # Over the books' window, like utilisation: a streamed run keeps only those delays.
        first, last = window_bounds(done.size, nominal_warmup(done.size, r.warmup), r.cooldown)
        books = np.zeros(done.size, dtype=bool)
        books[np.argsort(arrivals, kind="stable")[first : last + 1]] = True
        qd = qd[books[r.queue_delay_jobs]]
    span = window.end - window.start
    if r.arrivals is not None and span > 0:
        throughput = window.throughput
    else:
        throughput = float(done.sum() / r.makespan_s) if r.makespan_s > 0 else 0.0
    metrics: dict[str, float | int | str] = {
        "policy": r.policy,
        "cluster": r.cluster,
        "n_servers": int(r.has_gpu.size),
        "workflows_submitted": int(r.response_times.size),
        "workflows_completed": int(done.sum()),
        "warmup_workflows": window.cut if r.arrivals is not None else 0,
        "warmup_method": window.cut_method if r.arrivals is not None else "none",
        "cooldown_workflows": int(done.size - measured.sum() - window.cut)
        if r.arrivals is not None
        else 0,
        "measured_workflows": int((done & measured).sum()),
        "tasks_completed": r.tasks_completed,
        "avg_response_time_s": fig["avg_response_time_s"],
        "p50_response_time_s": fig["p50_response_time_s"],
        "p95_response_time_s": fig["p95_response_time_s"],
        "p99_response_time_s": fig["p99_response_time_s"],
        "makespan_s": float(r.makespan_s),
        "throughput_wps": throughput,
        "offered_rate_wps": window.offered_rate,
        **verdict_keys(window),
        "mean_in_system": r.in_system_area / span
        if r.in_system_area is not None and span > 0
        else 0.0,
        "p99_slowdown": fig["p99_slowdown"],
        "mean_utilization": float(per_server.mean()) if per_server.size else 0.0,
        "mean_gpu_utilization": float(gpu_u[r.has_gpu].mean()) if r.has_gpu.any() else 0.0,
        "mean_cpu_utilization": float(cpu_u.mean()) if cpu_u.size else 0.0,
        "mean_queue_delay_s": _exact_mean(qd),
        "p95_queue_delay_s": _pct(qd, 95),
        "hedged_tasks": r.hedged_tasks,
        "extra_server_seconds": float(r.extra_server_seconds),
        "deferrals": r.deferrals,
        "model_loads": r.model_loads,
        "bytes_moved": float(r.bytes_moved),
        "decisions": r.decisions,
        "events": r.events,
        "mean_lower_bound_s": fig["mean_lower_bound_s"],
        "lower_bound_ratio": fig["lower_bound_ratio"],
        "sim_wall_time_s": r.wall_s,
    }
    if r.any_deployment_bounds is not None:
        metrics.update(any_deployment_figures(fig, r.any_deployment_bounds[done & measured]))
    metrics.update(_optional_metrics(r, measured))
    return metrics, window


def any_deployment_figures(fig: dict[str, float], bounds: np.ndarray) -> dict[str, float]:
    """The world-independent bound's keys beside ``response_figures``' ``fig`` (over the
    same workflows): its mean and the mean response over it. ``mean_lower_bound_s`` is the
    run's own deployment's bound (what placement within it is measured against); this one
    is the same for every world on the same jobs (what a deployment is measured against)."""
    mean_any = float(bounds.mean()) if bounds.size else 0.0
    mean_rt = fig["avg_response_time_s"]
    return {
        "mean_any_deployment_bound_s": mean_any,
        "any_deployment_bound_ratio": mean_rt / mean_any if mean_any > 0 else 0.0,
    }


def _optional_metrics(r: RunRecord, measured: np.ndarray) -> dict[str, float | int | str]:
    """The keys of the features a run had on: caches, re-sampled branches, replicas."""
    metrics: dict[str, float | int | str] = {}
    if r.kv is not None:
        metrics.update(kv_metrics(r.kv, measured))
    if r.tool_cache is not None:  # hits of the measured workflows only, like every figure
        jobs, saved = r.tool_cache
        hit = measured[jobs] if jobs.size else np.zeros(0, dtype=bool)
        metrics["tool_cache_hits"] = int(hit.sum())
        metrics["tool_cache_saved_s"] = float(saved[hit].sum())
    if r.logits is not None:
        metrics.update(logits_metrics(r.logits, measured))
    if r.replicas is not None:  # over the whole run, like model_loads
        requests, loads, released, calls, gpu_s = r.replicas
        metrics["replica_requests"] = requests
        metrics["replica_loads"] = loads
        metrics["replica_releases"] = released
        metrics["replica_calls"] = calls
        metrics["replica_gpu_seconds"] = float(gpu_s)
    return metrics


def steady_state_note(metrics: dict[str, float | int | str]) -> str:
    """Why a run was not judged steady, in one line for the user."""
    reason = str(metrics.get("steady_reason", "")) or "the steady-state tests failed"
    return f"the run did not reach steady state: {reason}"


def whole_run_window(arrivals: Sequence[float], response_times: Any) -> dict[str, Any]:
    """The load and steady-state figures of a run that measures every workflow (the Ray
    runtime, the load generator), from its real arrival times and response times (NaN for a
    workflow that did not complete), computed as the simulator computes them over the
    window from the first to the last arrival: the offered rate, the time-average number of
    workflows in the system (each completed workflow's time inside the window, summed, over
    its length) and the steady-state verdict."""
    arr = np.asarray(arrivals, dtype=float)
    rt = np.asarray(response_times, dtype=float)
    window = measurement_window(arr, rt, 0, 0)
    span = window.end - window.start
    done = np.isfinite(rt)
    inside = np.minimum(arr[done] + rt[done], window.end) - np.maximum(arr[done], window.start)
    return {
        "offered_rate_wps": window.offered_rate,
        "response_trend": window.trend if math.isfinite(window.trend) else -1.0,
        "steady_state": window.steady,
        "mean_in_system": math.fsum(np.maximum(inside, 0.0)) / span if span > 0 else 0.0,
    }
