"""One headroom study: run the policies and oracles on one setting, and put their means
beside the two lower bounds, the oracle's gain and each policy's decomposed gap."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scalesched.cache.kv import NO_CACHE
from scalesched.cluster.anywhere import any_deployment
from scalesched.cluster.tables import ClusterTables
from scalesched.eval.headroom.allocation import allocation_bound
from scalesched.eval.headroom.bound import BOUND_TIME_LIMIT_S, CapacityBound, capacity_bound
from scalesched.eval.headroom.decompose import (
    COMPONENT_HELP,
    Decomposition,
    Reuse,
    any_deployment_bound,
    contention_free_bound,
    decompose,
)
from scalesched.eval.headroom.lagrange import SAMPLE_WORKFLOWS, lagrangian_capacity_bound
from scalesched.eval.headroom.split import Bounds, Split, ordering_specs, paired
from scalesched.kernel.metrics import window_bounds
from scalesched.policies import best_heuristic, get_policy
from scalesched.policies.ordering import PLACEMENTS
from scalesched.policies.rollout import BASES, RolloutScheduler
from scalesched.runs.setup import RunSetup, run, scenario_capacity
from scalesched.runs.windows import default_cooldown, shared_warmup_cut
from scalesched.runs.world import RunWorld
from scalesched.stats import batch_means
from scalesched.workload.instance import Job

DEFAULT_ORACLES: tuple[str, ...] = ("rollout_oracle",)
"""Oracle rows by default: the clairvoyant rollout over the best heuristic (slow: about
1 s of CPU per workflow on hetero-16 at load 0.9)."""


@dataclass(frozen=True)
class Caches:
    """The caches every run of a study has (``simulate``'s options of the same names)."""

    kv_policy: str | None = None
    """KV reuse across calls (``--kv-policy``); None: engines keep no KV between calls."""
    tool_cache: bool = False
    """Repeated tool calls take their original's result (``--tool-cache on``)."""

    @property
    def reuse(self) -> Reuse:
        """What the bounds may count as skipped (``nocache`` measures and reuses nothing)."""
        return Reuse(kv=self.kv_policy not in (None, NO_CACHE), tools=self.tool_cache)


NO_CACHES = Caches()


@dataclass(frozen=True)
class PolicyRow:
    """One policy's run against the bounds."""

    name: str
    mean_s: float
    p99_s: float
    steady: bool
    oracle: bool
    decomposition: Decomposition
    base: str | None = None
    """For a rollout oracle, the heuristic it rolled out over."""
    cpu_s: float = 0.0
    """CPU seconds of the run and its decomposition (an oracle's cost, for sizing a map)."""
    mean_ci_s: float = math.nan
    """Half-width of the mean's 95% interval by batch means (``scalesched.stats``)."""

    def gap(self, bound: float) -> float:
        """Share of the mean above ``bound``: what a perfect scheduler could still win."""
        return (self.mean_s - bound) / self.mean_s if self.mean_s > 0 else 0.0


@dataclass(frozen=True)
class Headroom:
    """The study's result (``as_json`` is the command's ``--json``)."""

    setting: dict[str, Any]
    lower_bound_s: float
    capacity: CapacityBound
    rows: list[PolicyRow]
    best_heuristic: str | None
    notes: list[str] = field(default_factory=list)
    any_deployment_bound_s: float = math.nan
    """The world-independent contention-free bound over the same workflows: every call
    alone on the fastest configuration any deployment of the cluster can give its model."""
    split: Split | None = None
    """How much of each gap is deployment, placement and ordering (``split``)."""
    allocation: CapacityBound | None = None
    """The capacity-aware bound over every allocation of the cluster's GPUs
    (``allocation``; computed for the split only)."""

    @property
    def bound_s(self) -> float:
        """The tighter bound: the capacity-aware one when it exists (never below the
        contention-free one: both are lower bounds, so their maximum is one too)."""
        cap = self.capacity.mean_s
        return self.lower_bound_s if cap is None else max(cap, self.lower_bound_s)

    def row(self, name: str) -> PolicyRow | None:
        return next((r for r in self.rows if r.name == name), None)

    def oracle_figures(self, row: PolicyRow) -> dict[str, float | None]:
        """The oracle's gain over the best heuristic and the share of that heuristic's
        headroom (its mean less the bound) it captured."""
        best = self.row(self.best_heuristic) if self.best_heuristic else None
        if best is None:
            return {"gain_over_best": None, "headroom_captured": None}
        room = best.mean_s - self.bound_s
        won = best.mean_s - row.mean_s
        return {
            "gain_over_best": won / best.mean_s if best.mean_s > 0 else None,
            "headroom_captured": won / room if room > 0 else None,
        }

    def as_json(self) -> dict[str, Any]:
        policies = {
            r.name: {
                "mean_s": r.mean_s,
                "mean_ci_s": r.mean_ci_s,
                "p99_s": r.p99_s,
                "steady": r.steady,
                "gap": r.gap(self.bound_s),
                "gap_contention_free": r.gap(self.lower_bound_s),
                "oracle": r.oracle,
                "best_heuristic": r.name == self.best_heuristic,
                "cpu_s": r.cpu_s,
            }
            for r in self.rows
        }
        oracle = {
            r.name: {
                "mean_s": r.mean_s,
                "p99_s": r.p99_s,
                "base": r.base,
                **self.oracle_figures(r),
            }
            for r in self.rows
            if r.oracle
        }
        return {
            "setting": self.setting,
            "lower_bound": {
                "mean_s": self.lower_bound_s,
                "what": "contention-free: every task alone on its fastest server of this "
                "deployment (or world)",
            },
            "any_deployment_bound": {
                "mean_s": self.any_deployment_bound_s,
                "what": "contention-free over every deployment: every call alone on the "
                "fastest configuration any deployment of the cluster can give its model",
            },
            "capacity_bound": {
                **self.capacity.as_json(),
                "what": "fluid relaxation: fast servers' decode, KV and slot capacity at the "
                "offered rate (docstring of scalesched.eval.headroom.bound)",
            },
            "allocation_bound": None
            if self.allocation is None
            else {
                **self.allocation.as_json(),
                "what": "fluid relaxation over allocations: the capacity-aware program with "
                "every configuration any deployment could pin as its classes and the GPUs "
                "given to each as variables (docstring of scalesched.eval.headroom.allocation)",
            },
            "bound_s": self.bound_s,
            "best_heuristic": self.best_heuristic,
            "policies": policies,
            "oracle": oracle,
            "decomposition": {
                "components": COMPONENT_HELP,
                "policies": {r.name: r.decomposition.as_json() for r in self.rows},
            },
            "split": self.split.as_json() if self.split is not None else None,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class _Run:
    """One row's simulation, before the shared window is known."""

    name: str
    result: Any
    oracle: bool
    base: str | None
    cpu_s: float


def _run_one(
    setup: RunSetup,
    name: str,
    on_done: Callable[[int], None],
    caches: Caches,
    oracle_base: str | None = None,
) -> _Run:
    """Run one row, its warm-up found from its responses (MSER-5). An oracle row
    (``oracle_base`` given) that is a rollout (the oracle, or ``rollout`` on sampled
    futures) rolls out over that heuristic unless its spec names a ``base``."""
    scheduler = get_policy(name)
    base = None
    if oracle_base is not None and isinstance(scheduler, RolloutScheduler):
        if "base=" not in name:
            scheduler = dataclasses.replace(scheduler, base=oracle_base, base_policy=None)
            scheduler.name = name  # type: ignore[misc]
        base = scheduler.base
    started = time.process_time()
    result = run(
        setup,
        scheduler,
        record_trace=True,
        on_workflow_done=on_done,
        kv_policy=caches.kv_policy,
        tool_cache=caches.tool_cache,
    )
    return _Run(name, result, oracle_base is not None, base, time.process_time() - started)


def _row(
    setup: RunSetup, r: _Run, measured: dict[int, float], first: int, last: int, caches: Caches
) -> PolicyRow:
    """A run against the bounds over the shared window (workflows ``first..last`` in
    arrival order): its mean and p99 over those workflows, its gap decomposed."""
    kept = r.result.series[first : last + 1]
    kept = kept[np.isfinite(kept)]
    split, _ = decompose(setup.tables, setup.jobs, measured, r.result.trace, caches.reuse)
    return PolicyRow(
        name=r.name,
        mean_s=float(kept.mean()) if kept.size else math.nan,
        p99_s=float(np.percentile(kept, 99)) if kept.size else math.nan,
        steady=bool(r.result.metrics["steady_state"]),
        oracle=r.oracle,
        decomposition=split,
        base=r.base,
        cpu_s=r.cpu_s,
        mean_ci_s=batch_means(kept).half_width,
    )


def worse_than_base_notes(rows: Sequence[PolicyRow]) -> list[str]:
    """A note for each rollout row whose mean is above its base's: such an oracle is not
    an upper bound on what a scheduler can win here (its view ends before the cost of the
    placements it weighs, or its sampled futures are too far from the true one;
    docs/headroom-map.md measured a 20 s view 1.107x ``tail`` on a mix with one fast server
    for five slow ones, and a 60 s view 0.961x)."""
    means = {r.name: r.mean_s for r in rows}
    return [
        f"{r.name} is {r.mean_s / means[r.base]:.3f}x its base {r.base}: its lookahead does "
        "not see what its placements cost here (a view too short, or sampled futures too far "
        "from the true one), so its gain is no measure of headroom; try a longer horizon_s, "
        "and more seeds where the ratio is within a percent of 1"
        for r in rows
        if r.oracle and r.base in means and r.mean_s > means[r.base]
    ]


def oracle_base(best: str | None) -> str:
    """The heuristic a rollout oracle rolls out over: the measured best heuristic where
    the rollout can be built over it (a deterministic one, ``BASES``), else ``tail``.
    An oracle over a weaker base would measure that base's room, not the best's."""
    return best if best in BASES else "tail"


def _steady_rate(setup: RunSetup, window_rate: float) -> float:
    """The arrival rate the capacity bound spreads the window's work over: the scenario's
    long-run rate (``--rate``, or ``--load`` x the measured capacity) when it is below the
    window's own (a short window can draw a burst, which a run absorbs from its cool-down),
    else the window's: the smaller rate, the looser and safer bound."""
    scenario = setup.scenario
    if scenario.arrivals.startswith("replay:"):
        return window_rate  # a replay's times are its rate: --load and --rate do not apply
    nominal = scenario.rate
    if nominal is None:
        capacity = scenario_capacity(setup.tables, scenario)  # cached by ``prepare``
        nominal = scenario.load * capacity if capacity is not None else None
    return min(window_rate, nominal) if nominal else window_rate


def measure_headroom(
    setup: RunSetup,
    policies: Sequence[str],
    oracles: Sequence[str] = DEFAULT_ORACLES,
    *,
    progress: Callable[[str], Callable[[int], None]] | None = None,
    caches: Caches = NO_CACHES,
    bound_time_limit_s: float | None = BOUND_TIME_LIMIT_S,
    split: bool = False,
    dynamic_policies: Sequence[str] | None = None,
    bound_sample: int = SAMPLE_WORKFLOWS,
) -> Headroom:
    """Run ``policies`` then ``oracles`` (registered names) on ``setup`` (jobs realised up
    front: the decomposition reads every task's record) with ``caches``, measure every row
    over one window (the largest warm-up MSER found among the steady runs, then the run-out),
    and compute the bounds over the measured workflows (counting
    what those caches could skip; the capacity-aware bound within ``bound_time_limit_s``
    wall seconds, else none). ``progress(label)`` gives the per-run callback of completed
    workflows.

    ``split``: also split each gap into deployment, placement and ordering (``split``
    module): the ordering rules run over the best heuristic's placement router, and, on a
    deployment, ``dynamic_policies`` (default the best heuristic and ``tail``, each run
    there costs as much as a policy row) run on dynamic residency with
    the same jobs; those runs are measured over the same window but do not set it (an
    overloaded world's warm-up is not one). ``bound_sample``: a window of more workflows
    gets the capacity-aware bound's Lagrangian form priced on that many (``lagrange``);
    0: the whole program, however long it takes."""
    jobs = sorted(setup.jobs, key=lambda j: (j.arrival, j.workflow_id))
    n = len(jobs)

    def tick(name: str) -> Callable[[int], None]:
        return progress(name) if progress is not None else (lambda done: None)

    runs = [_run_one(setup, name, tick(name), caches) for name in policies]
    best = best_heuristic({r.name: float(r.result.metrics["avg_response_time_s"]) for r in runs})
    ordering: list[tuple[str, str, str]] = []
    extra: list[_Run] = []
    if split:
        ordering, extra = _ordering_runs(setup, runs, best, caches, tick)
    base = oracle_base(best)
    for name in oracles:
        runs.append(_run_one(setup, name, tick(name), caches, oracle_base=base))
    dynamic: list[_Run] = []
    if split and setup.deployment is not None:
        plain = _dynamic_setup(setup)
        names = list(dynamic_policies or dict.fromkeys([best or "tail", "tail"]))
        dynamic = [_run_one(plain, name, tick(f"{name} (dynamic)"), caches) for name in names]
    cut = _window_cut(runs)
    first, last = window_bounds(n, cut, default_cooldown(n))
    window = jobs[first : last + 1]
    reuse = caches.reuse
    measured = {j.workflow_id: contention_free_bound(setup.tables, j, reuse) for j in window}
    rows = [_row(setup, r, measured, first, last, caches) for r in runs]
    best = best_heuristic({r.name: r.mean_s for r in rows if not r.oracle})
    span = window[-1].arrival - window[0].arrival if len(window) > 1 else 0.0
    rate = (len(window) - 1) / span if span > 0 else 0.0
    steady_rate = _steady_rate(setup, rate)
    limits = (bound_time_limit_s, bound_sample)
    cap = _capacity(setup, window, steady_rate, jobs, caches, *limits)
    alloc = _capacity(setup, window, steady_rate, jobs, caches, *limits, True) if split else None
    notes = [f"{r.name} did not reach steady state" for r in rows if not r.steady]
    if oracles and best is not None and base != best:
        notes.append(f"the rollout oracle rolls out over {base}: it cannot be built over {best}")
    notes += _unsolved_notes(cap, alloc) + worse_than_base_notes(rows)
    lb = math.fsum(measured.values()) / max(1, len(measured))
    anywhere = any_deployment(setup.cluster)
    any_lb = math.fsum(any_deployment_bound(anywhere, j, reuse) for j in window) / max(
        1, len(window)
    )
    setting = _setting(setup, caches, rate, n, len(window), first)
    study = Headroom(setting, lb, cap, rows, best, notes, any_lb, allocation=alloc)
    if split:
        series = {r.name: r.result.series[first : last + 1] for r in [*runs, *extra]}
        parts = _split(study, series, ordering, dynamic, (first, last))
        study = dataclasses.replace(study, split=parts)
    return study


def _unsolved_notes(cap: CapacityBound, alloc: CapacityBound | None) -> list[str]:
    """A note per capacity-aware bound that was not solved, saying why."""
    notes = [f"no capacity bound: {cap.status}"] if cap.mean_s is None else []
    if alloc is not None and alloc.mean_s is None:
        notes.append(f"no capacity bound over allocations: {alloc.status}")
    return notes


def _window_cut(runs: Sequence[_Run]) -> int:
    """Every row is measured over the same workflows: from the largest warm-up cut among the
    steady runs (``runs.windows.shared_warmup_cut``)."""
    return shared_warmup_cut(
        (int(r.result.metrics["warmup_workflows"]), bool(r.result.metrics["steady_state"]))
        for r in runs
    )


def _capacity(
    setup: RunSetup,
    window: list[Job],
    rate: float,
    jobs: list[Job],
    caches: Caches,
    time_limit_s: float | None,
    sample: int,
    over_allocations: bool = False,
) -> CapacityBound:
    """The capacity-aware bound: the whole program (``sample`` 0, or a window no larger),
    else its Lagrangian form priced on ``sample`` workflows (``lagrange``); of this
    deployment, or ``over_allocations`` of the cluster's GPUs (``allocation``)."""
    if over_allocations:
        return allocation_bound(
            setup.tables,
            window,
            rate,
            jobs,
            sample=max(0, sample),
            reuse=caches.reuse,
            time_limit_s=time_limit_s,
        )
    if sample <= 0:
        return capacity_bound(
            setup.tables, window, rate, jobs, reuse=caches.reuse, time_limit_s=time_limit_s
        )
    return lagrangian_capacity_bound(
        setup.tables,
        window,
        rate,
        jobs,
        sample=sample,
        reuse=caches.reuse,
        time_limit_s=time_limit_s,
    )


def offered_label(setting: dict[str, Any]) -> str:
    """How a study's offered traffic reads in its title and chart: ``load 0.7 (12.65
    workflows/s)`` where a load was resolved to a rate (a planned world), ``load 0.7``
    where it was not, ``3 workflows/s`` where a rate was given."""
    rate = f"{setting['rate']:.4g} workflows/s" if setting["rate"] is not None else None
    if setting["load"] is None:
        return str(rate)
    return f"load {setting['load']}" + (f" ({rate})" if rate else "")


def _setting(
    setup: RunSetup, caches: Caches, rate: float, n: int, measured: int, first: int
) -> dict[str, Any]:
    """The study's setting, as ``--json`` names it."""
    scenario = setup.scenario
    return {
        "cluster": setup.cluster.name,
        "workload": scenario.workload,
        "world": setup.world.name,
        "deployment": setup.world.plan,
        "load": setup.load,
        "rate": scenario.rate,
        "arrivals": scenario.arrivals,
        "tool_repeat": scenario.tool_repeat,
        "kv_policy": caches.kv_policy,
        "tool_cache": caches.tool_cache,
        "offered_rate_wps": rate,
        "workflows": n,
        "measured_workflows": measured,
        "warmup_workflows": first,
        "seed": scenario.seed,
    }


def _dynamic_setup(setup: RunSetup) -> RunSetup:
    """The same jobs (same arrivals, same seed) on dynamic residency: the cluster's plain
    tables, no deployment."""
    plain = ClusterTables(setup.cluster)
    return dataclasses.replace(
        setup, tables=plain, deployment=None, world=RunWorld("dynamic", note="split")
    )


def _ordering_runs(
    setup: RunSetup,
    runs: list[_Run],
    best: str | None,
    caches: Caches,
    tick: Callable[[str], Callable[[int], None]],
) -> tuple[list[tuple[str, str, str]], list[_Run]]:
    """Run each ordering rule over the best heuristic's placement router (``tail`` when the
    best is not a router: ``fcfs_workflow`` is tail's placement), and the router itself,
    where ``runs`` do not hold them. Returns (rule, its spec, the router) per rule and the
    runs made (not rows of the study: the split reads their windowed means)."""
    router = best if best in PLACEMENTS else "tail"
    have = {r.name for r in runs}
    specs = ordering_specs(router)
    extra = [
        _run_one(setup, name, tick(name), caches) for name in [router, *specs] if name not in have
    ]
    rules = [spec.split(":", 1)[0] for spec in specs]
    return [(rule, spec, router) for rule, spec in zip(rules, specs, strict=True)], extra


def _split(
    study: Headroom,
    series: dict[str, np.ndarray],
    ordering: list[tuple[str, str, str]],
    dynamic: list[_Run],
    window: tuple[int, int],
) -> Split:
    """The study's split (``split`` module) from its rows' windowed series."""
    first, last = window
    bounds = Bounds(
        any_deployment_s=study.any_deployment_bound_s,
        deployment_s=study.bound_s,
        deployment_contention_free_s=study.lower_bound_s,
        allocation_s=study.allocation.mean_s if study.allocation is not None else None,
    )
    means = {r.name: r.mean_s for r in study.rows}
    measured = {name: _finite_mean(values) for name, values in series.items()}
    if dynamic:
        dyn_series = {r.name: r.result.series[first : last + 1] for r in dynamic}
        dyn_means = {k: _finite_mean(v) for k, v in dyn_series.items()}
        steady = {r.name: bool(r.result.metrics["steady_state"]) for r in dynamic}
    else:  # the study is on dynamic residency already: its rows are the dynamic runs
        dyn_series = {r.name: series[r.name] for r in study.rows if not r.oracle}
        dyn_means = {r.name: r.mean_s for r in study.rows if not r.oracle}
        steady = {r.name: r.steady for r in study.rows if not r.oracle}
    dyn_best = best_heuristic(dyn_means)
    gain = None
    if dyn_best is not None and study.best_heuristic is not None:
        both = {"dynamic": dyn_series[dyn_best], "planned": series[study.best_heuristic]}
        gain = dataclasses.replace(
            paired("dynamic", "planned", both), a=f"{dyn_best} (dynamic)", b=study.best_heuristic
        )
    changes = [
        (rule, paired(spec, router, series), measured[spec], measured[router])
        for rule, spec, router in ordering
    ]
    return Split(
        bounds=bounds,
        means=means,
        best=study.best_heuristic,
        dynamic=dyn_means,
        dynamic_best=dyn_best,
        planning_gain=gain,
        ordering=changes,
        oracle={r.name: r.mean_s for r in study.rows if r.oracle},
        dynamic_steady=steady,
    )


def _finite_mean(values: np.ndarray) -> float:
    kept = values[np.isfinite(values)]
    return float(kept.mean()) if kept.size else math.nan
