"""The world a run happens in: a planned deployment (the default of every command) or
dynamic residency.

Real serving stacks run fixed deployments: engines of each model, replicated data-parallel
on chosen GPUs, behind a router. Dynamic residency (one engine per model per server, loaded
on demand, least recently used evicted) is the simulator's older world; on the same
hetero-16 it sustains a third of the traffic a planned deployment does. So a run without a
deployment file gets one planned for its offered rate by the Scepsy planner
(``scalesched.plan``), and ``--load`` is a fraction of the *planned world's* capacity:

* **Planned capacity** is the most throughput a plan delivers: plan for a rate r, offer the
  plan 1.1 r (past its saturation, where the window throughput is a tight estimate of the
  service rate) and take what it delivers, for r growing by 1.15x from the dynamic
  world's capacity until it stops paying (``measure_planned_capacity``). Bisecting on the
  steady verdict is noisy near saturation (docs/steady-state.md).
* **Never worse than dynamic**: where the planned world's capacity is below the dynamic
  world's, the run falls back to dynamic residency and says so (``RunWorld.note``).
* Plans and capacities are cached (memory and ``~/.cache/scalesched``), keyed by cluster,
  workload, rate and the planner's version, so every policy of a study runs on the same
  deployment and a second command does not plan again.

``residency="dynamic"`` keeps the older world and reproduces its results exactly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalesched.cluster.deployment import (
    Deployment,
    deployment_from_dict,
    deployment_to_dict,
)
from scalesched.cluster.model import ClusterSpec
from scalesched.errors import InputError
from scalesched.plan import PLANNER_VERSION
from scalesched.runs.capacity import PLANNED_METHOD

if TYPE_CHECKING:
    from scalesched.runs.capacity import CapacityResult, Reporter

WORLDS = ("planned", "dynamic")
PROFILE_SAMPLES = 1000
PROFILE_SEED = 20261
"""The planner's workload profile: sample workflows and their seed (the ``plan``
command's defaults; not an evaluation seed)."""
PAST_BEST = 2
"""The search over planned-for rates stops this many steps past the best one."""
RATE_STEP = 1.15
"""Each step of the search plans for this multiple of the last rate."""
PLANNED_OVERLOAD = 1.1
"""A plan is offered this multiple of the rate it was planned for. A plan for r holds
little more than r's capacity, so this is past its saturation; 1.25x (the dynamic world's
overload) is far enough past it that queues thrash: on hetero-32 the plan for 18.5 wf/s
offered 23 delivered less than the plan for 14.8 offered 18.5, where the plan for 18
offered 18.5 delivers 17.5."""
PROBE_SPAN_S = 240.0
"""A planned probe's arrivals span at least this many seconds. The window throughput counts
the completions inside the window, so a run whose fixed 20% warm-up is shorter than a few
mean responses under-counts: planned deployments take three times the dynamic world's
rate at responses of 25-35 s, and 1500 workflows at 23 workflows/s span 65 s (warm-up
13 s), where the plan that delivers 22.8 of 23.4 offered over 6000 workflows (steady)
showed 16.6. The dynamic world's probes span 250 s or more at every preset size."""
SEARCH_RUNS = 24
"""About how many runs a planned capacity takes (for the progress bar)."""


def check_residency(residency: str) -> str:
    if residency not in WORLDS:
        raise InputError(
            "--residency", "residency", f"must be planned or dynamic, got {residency!r}"
        )
    return residency


@dataclass(frozen=True)
class RunWorld:
    """The world a run was set up in, as its output names it."""

    name: str
    """``planned``, ``dynamic`` or ``deployment`` (a file the user gave)."""
    plan: str = ""
    """The deployment's name (a planned one says its rate and the planner's version)."""
    note: str = ""
    """Why the run is not in the world asked for (a fallback), else empty."""

    def metrics(self) -> dict[str, str]:
        return {"world": self.name, "deployment": self.plan, "world_note": self.note}


@functools.cache
def _profile(workload: str) -> Any:
    from scalesched.plan.profile import workload_profile

    return workload_profile(workload, samples=PROFILE_SAMPLES, seed=PROFILE_SEED)


def _rate_key(rate: float) -> str:
    """Plans are made for a rate rounded to 4 significant digits: a rate that differs only
    in its 16th digit (a load times a capacity) gets the same cached plan."""
    return f"{rate:.4g}"


_plans: dict[str, Deployment] = {}


def plan_deployment(
    spec: ClusterSpec, workload: str, rate: float, *, slo_mean_s: float | None = None
) -> Deployment:
    """The planner's deployment of ``spec`` for ``workload`` at ``rate`` workflows/s, from a
    cache when one holds it. A rate past what any plan sustains gets the plan for the
    planner's predicted ceiling (the most throughput it can place), not a plan for an
    infeasible rate. ``slo_mean_s``: the smallest plan the planner reaches a predicted mean
    response of that many seconds with (``search_plan``), not the fastest."""
    from scalesched.runs.capacity import cluster_fingerprint, workload_fingerprint

    parts = [
        PLANNER_VERSION,
        cluster_fingerprint(spec),
        workload_fingerprint(workload),
        _rate_key(rate),
    ]
    if slo_mean_s is not None:
        parts.append(f"slo={slo_mean_s:.4g}")
    key = "|".join(parts)
    if key in _plans:
        return _plans[key]
    stored = _read_plan_cache().get(key)
    if stored is not None:
        try:
            deployment = deployment_from_dict(stored, spec, "plan cache")
        except InputError:
            deployment = None
        if deployment is not None:
            _plans[key] = deployment
            return deployment
    slo = "" if slo_mean_s is None else f"-slo{slo_mean_s:.4g}s"
    data = deployment_to_dict(
        f"plan-{spec.name}-{_rate_key(rate)}wps{slo}-{PLANNER_VERSION}",
        spec.name,
        _search(spec, workload, rate, slo_mean_s).replicas,
    )
    deployment = deployment_from_dict(data, spec, "planner")
    _plans[key] = deployment
    _write_plan_cache(key, data)
    return deployment


def _search(spec: ClusterSpec, workload: str, rate: float, slo_mean_s: float | None) -> Any:
    from scalesched.plan.search import search_plan

    profile = _profile(workload)
    result = search_plan(spec, profile, float(_rate_key(rate)), slo_mean_s=slo_mean_s)
    ceiling = result.prediction.throughput_wps
    if not math.isfinite(result.prediction.mean_s) and 0 < ceiling < rate:
        rate = float(_rate_key(0.999 * ceiling))
        result = search_plan(spec, profile, rate, slo_mean_s=slo_mean_s)
    return result


CEILING_GRID = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""Rates, as multiples of the dynamic world's capacity, the planner is asked for when
looking for its ceiling."""


def predicted_ceiling(spec: ClusterSpec, workload: str) -> float:
    """The most throughput the planner predicts one of its plans sustains: the best of its
    plans for rates from 1x to 6x the dynamic world's capacity that serve every model (a
    plan for an absurd rate spreads its penalty so thin that some model gets nothing)."""
    from scalesched.plan.search import search_plan
    from scalesched.runs.capacity import capacity_wps

    base = capacity_wps(spec, workload)
    best = 0.0
    for k in CEILING_GRID:
        result = search_plan(spec, _profile(workload), float(_rate_key(k * base)))
        if not any(n.startswith("no replica") for n in result.notes):
            best = max(best, float(result.prediction.throughput_wps))
    return best


# ------------------------------------------------------------------------- the plan cache


def _plan_cache_path() -> Path:
    """Beside the capacity cache (``runs.capacity.cache_dir``)."""
    from scalesched.runs.capacity import cache_dir

    return cache_dir() / "plans.json"


def _read_plan_cache() -> dict[str, Any]:
    try:
        data = json.loads(_plan_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_plan_cache(key: str, data: dict[str, Any]) -> None:
    """Add a plan; a cache that cannot be written costs a re-plan next time, nothing else."""
    from scalesched.runs.capacity import write_json_atomically

    table = _read_plan_cache()
    table[key] = data
    with contextlib.suppress(OSError):
        write_json_atomically(_plan_cache_path(), table)


# --------------------------------------------------------------------- planned capacity


def _probe(
    spec: ClusterSpec, workload: str, deployment: Deployment, policy: str, rate: float
) -> tuple[float, bool]:
    """Window throughput of ``policy`` on ``deployment`` offered ``rate``, and whether it
    was steady: the dynamic world's probe (``runs.capacity.probe_throughput``) on the
    planned tables."""
    from scalesched.cluster.tables import ClusterTables
    from scalesched.runs.capacity import probe_throughput, workflows_for

    plain = ClusterTables(spec)
    planned = ClusterTables(spec, deployment)
    workflows = max(workflows_for(plain.n), math.ceil(rate * PROBE_SPAN_S))
    return probe_throughput(plain, planned, workload, policy, rate, workflows)


def measure_planned_capacity(
    spec: ClusterSpec, workload: str, reporter: Reporter | None = None
) -> CapacityResult:
    """The planned world's capacity: the most throughput a plan delivers, over the rates it
    is planned for (module docstring).

    A plan for rate r holds little more than r's capacity (the planner spends the rest of
    the GPUs on latency), and a plan for a rate past what the cluster takes is a poor plan
    (the planner spreads its shortfall over every model). So the rate planned for is a
    search variable: from the dynamic world's capacity, each step plans for ``RATE_STEP``
    times the last, offers the plan ``PLANNED_OVERLOAD`` times its rate (past its
    saturation, where the window throughput is the service rate) and records what ``eft``
    delivers; it stops two steps past the best or at the planner's ceiling. At the best
    rate the three capacity policies run, and the best of them is the capacity."""
    from scalesched.runs.capacity import (
        CAPACITY_POLICIES,
        CapacityResult,
        capacity_wps,
        workflows_for,
    )

    wall = time.perf_counter()
    ceiling = predicted_ceiling(spec, workload)
    if ceiling <= 0:
        raise InputError(
            spec.name, "servers", f"the planner cannot place every model of {workload}"
        )
    probes: list[dict[str, Any]] = []

    def probe(policy: str, plan_for: float) -> float:
        offer = PLANNED_OVERLOAD * plan_for
        got, steady = _probe(
            spec, workload, plan_deployment(spec, workload, plan_for), policy, offer
        )
        row = {"policy": policy, "rate_wps": offer, "throughput_wps": got, "steady": steady}
        probes.append({**row, "plan_for_wps": plan_for, "seeds": 2})
        if reporter is not None:
            reporter.probed(row, 2)
        return got

    rate = capacity_wps(spec, workload)
    best_rate, best, worse = rate, 0.0, 0
    while rate <= ceiling and worse < PAST_BEST:
        got = probe("eft", rate)
        if got > best:
            best_rate, best, worse = rate, got, 0
        else:
            worse += 1
        rate *= RATE_STEP
    per_policy = {"eft": best}
    for policy in CAPACITY_POLICIES:
        if policy != "eft":
            per_policy[policy] = probe(policy, best_rate)
    best_policy = max(per_policy, key=lambda p: per_policy[p])
    return CapacityResult(
        cluster=spec.name,
        workload=workload,
        capacity_wps=per_policy[best_policy],
        best_policy=best_policy,
        per_policy_wps=per_policy,
        saturated_wps=per_policy,
        nominal_wps=ceiling,
        runs=2 * len(probes),
        workflows_per_run=workflows_for(len(spec.servers)),
        method=PLANNED_METHOD,
        measured_s=time.perf_counter() - wall,
        probes=probes,
    )


_capacity: dict[str, float] = {}


def planned_capacity_wps(
    spec: ClusterSpec, workload: str, reporter: Reporter | None = None
) -> float:
    """The planned world's capacity, from a cache when one holds it, else measured now
    (a notice on stderr) and cached."""
    from scalesched.runs.capacity import Reporter, cache_key, cached_entry, store_result

    key = cache_key(spec, workload, method=PLANNED_METHOD)
    if key in _capacity:
        return _capacity[key]
    entry = cached_entry(key)
    if entry is None:
        reporter = reporter or Reporter()
        reporter.started(
            f"measuring the planned-deployment capacity of {spec.name} for {workload} "
            "(plans and simulates a few times; cached afterwards)",
            SEARCH_RUNS,
        )
        try:
            result = measure_planned_capacity(spec, workload, reporter)
        finally:
            reporter.finished()
        store_result(key, result)
        value = result.capacity_wps
    else:
        value = float(entry["capacity_wps"])
    _capacity[key] = value
    return value


def plan_load(load: float, step: float) -> float:
    """The load a plan is made for: ``load`` rounded to a multiple of ``step`` (0: as it
    is), never below one step. Training draws a load per episode from a continuum; plans
    for loads on a grid are few and cached, where one per drawn load would re-plan almost
    every episode."""
    if step <= 0:
        return load
    return max(step, round(load / step) * step)


def resolve_world(
    spec: ClusterSpec,
    workload: str,
    residency: str,
    *,
    rate: float | None,
    load: float,
    plan_step: float = 0.0,
) -> tuple[float | None, Deployment | None, RunWorld]:
    """The offered rate (None: the caller resolves ``load`` in the dynamic world, as before),
    the deployment and the world of a run asked for in ``residency``. A given ``rate`` is
    planned for directly; a ``load`` is a fraction of the planned world's capacity, and a
    cluster whose planned world sustains less than its dynamic one falls back (a note).
    ``plan_step`` > 0 plans for the load rounded to that step (:func:`plan_load`) while
    offering the load itself."""
    from scalesched.runs.capacity import capacity_wps

    if check_residency(residency) == "dynamic":
        return rate, None, RunWorld("dynamic")
    if not _profile(workload).models:
        return rate, None, RunWorld("dynamic", note="the workload makes no LLM calls: no plan")
    if rate is not None:  # a given rate: plan for it (no capacity is needed, none measured)
        deployment = plan_deployment(spec, workload, rate)
        return rate, deployment, RunWorld("planned", deployment.name)
    planned = planned_capacity_wps(spec, workload)
    dynamic = capacity_wps(spec, workload)
    if planned < dynamic:
        note = (
            f"the planned world sustains {planned:.3g} workflows/s here, less than dynamic "
            f"residency's {dynamic:.3g}: this run uses dynamic residency"
        )
        return rate, None, RunWorld("dynamic", note=note)
    offered = load * planned
    deployment = plan_deployment(spec, workload, plan_load(load, plan_step) * planned)
    return offered, deployment, RunWorld("planned", deployment.name)


def planned_capacity_report(
    spec: ClusterSpec, workload: str, *, remeasure: bool = False, verbose: bool = False
) -> dict[str, Any]:
    """What ``scalesched capacity`` prints for the planned world: its capacity beside the
    dynamic world's, and whether runs fall back (the planned world sustaining less)."""
    from scalesched.runs.capacity import (
        Reporter,
        cache_key,
        cached_entry,
        capacity_wps,
        store_result,
    )

    key = cache_key(spec, workload, method=PLANNED_METHOD)
    entry = None if remeasure else cached_entry(key)
    source = "cache"
    if entry is None:
        reporter = Reporter(verbose=verbose)
        reporter.started(
            f"measuring the planned-deployment capacity of {spec.name} for {workload}",
            SEARCH_RUNS,
        )
        try:
            result = measure_planned_capacity(spec, workload, reporter)
        finally:
            reporter.finished()
        store_result(key, result)
        entry = result.to_json()
        entry.pop("probes", None)
        source = "measured now"
    _capacity[key] = float(entry["capacity_wps"])
    dynamic = capacity_wps(spec, workload)
    planned = float(entry["capacity_wps"])
    return {
        "cluster": spec.name,
        "workload": workload,
        "world": "planned" if planned >= dynamic else "dynamic (fallback)",
        "capacity_wps": max(planned, dynamic),
        "planned_capacity_wps": planned,
        "dynamic_capacity_wps": dynamic,
        "planned_over_dynamic": planned / dynamic,
        "best_policy": entry["best_policy"],
        "method": entry["method"],
        "planner": PLANNER_VERSION,
        "source": source,
        "cached": source == "cache",
    }
