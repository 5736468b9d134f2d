"""Measured capacity: the arrival rate a cluster sustains for a workload.

``--load`` is a fraction of this figure, so load 0.9 means "90% of what the best heuristic
keeps up with", whatever the cluster's mix. The analytic estimate that came before
(``nominal_capacity``: bottleneck GPU-seconds at a reference batch) was off by up to 2x in
both directions on our presets (a 70B model that fits only some servers is a bottleneck the
aggregate cannot see; continuous batching makes H100 servers faster than the reference
batch assumes), so it now only seeds the search.

Method (docs/steady-state.md):

* A policy *keeps up* with a rate when long runs at that rate (``workflows_for`` workflows,
  20% warm-up and 10% cool-down excluded) on both capacity seeds are judged steady by
  :func:`scalesched.sim.metrics.measurement_window`: completions keep pace with arrivals and
  response times do not grow across the window.
* For each policy of ``CAPACITY_POLICIES``: offer a rate until the run is overloaded
  (starting at 1.5x nominal, doubling while it keeps up); the throughput it delivers there
  is its saturated throughput ``sat``; then bisect between ``0.5 sat`` and ``1.25 sat`` for
  the highest rate it keeps up with (four steps: about 4% resolution).
* Capacity is the highest of those rates over the policies. Runs use fixed workload seeds
  (``CAPACITY_SEEDS``), so capacity is a property of (cluster, workload) alone and every run
  seed sees the same arrival rate at a given load.

Results are cached by a fingerprint of the cluster's servers and of the workload spec (a
preset's name, a file's content): first in memory, then in the user cache file
(``$SCALESCHED_CACHE_DIR`` or ``~/.cache/scalesched``), then in the table shipped with the
package for the presets the docs and tests use (``scripts/measure_capacity.py`` writes it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from scalesched.cluster.model import ClusterSpec
from scalesched.errors import InputError

CAPACITY_METHOD = "bisect-steady-v2"
"""Changes whenever the method changes, so stale cache entries are never read."""
CAPACITY_SEEDS: tuple[int, ...] = (20260, 20261)
"""Workload seeds of the capacity runs: disjoint from evaluation (0-99) and validation
(1000+) seeds. A rate is kept up with only if the runs of both seeds are steady: near
saturation one seed's verdict is noise (on hetero-16 at 4.0 wf/s eft is steady on seed
20260 and overloaded on 20261 and 20262)."""
CAPACITY_POLICIES: tuple[str, ...] = ("eft", "least_loaded", "kv_aware")
"""Whose sustainable rate is measured. heft_online places like eft and p2c samples among
eft's candidates; neither sustained a higher rate than eft on the presets we measured."""
WARMUP_FRACTION = 0.2
COOLDOWN_FRACTION = 0.1
BISECTION_STEPS = 4
"""Resolution: 0.75 sat / 2^4, about 4% of capacity."""
MIN_WORKFLOWS = 1500
WORKFLOWS_PER_SERVER = 40
"""Runs hold max(MIN_WORKFLOWS, 40 N) workflows (a 1050-workflow window or more), so the
window spans many response times at every size (arrivals scale with N)."""

_SHIPPED = "capacity.json"


def workflows_for(n_servers: int) -> int:
    """Workflows per capacity run; ``$SCALESCHED_CAPACITY_WORKFLOWS`` replaces the minimum
    (shorter runs measure faster and less precisely: the test suite uses 300)."""
    minimum = MIN_WORKFLOWS
    override = os.environ.get("SCALESCHED_CAPACITY_WORKFLOWS")
    if override:
        try:
            value = int(override)
        except ValueError:
            raise InputError(
                "SCALESCHED_CAPACITY_WORKFLOWS", "value", f"expected an integer, got {override!r}"
            ) from None
        if value < 50:
            raise InputError("SCALESCHED_CAPACITY_WORKFLOWS", "value", "must be at least 50")
        minimum = value
    return max(minimum, WORKFLOWS_PER_SERVER * n_servers)


def default_warmup(workflows: int) -> int:
    return int(round(WARMUP_FRACTION * workflows))


def default_cooldown(workflows: int) -> int:
    return int(round(COOLDOWN_FRACTION * workflows))


@dataclass(frozen=True)
class CapacityResult:
    """What ``scalesched capacity`` reports."""

    cluster: str
    workload: str
    capacity_wps: float
    """The highest arrival rate (workflows/s) one of the policies keeps up with."""
    best_policy: str
    per_policy_wps: dict[str, float]
    saturated_wps: dict[str, float]
    """Throughput each policy delivers when overloaded."""
    nominal_wps: float
    """The analytic estimate the search started from."""
    runs: int
    workflows_per_run: int
    method: str = CAPACITY_METHOD
    measured_s: float = 0.0
    probes: list[dict[str, Any]] = field(default_factory=list)
    """Every run of the search: policy, offered rate, delivered throughput, verdict."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cluster_fingerprint(spec: ClusterSpec) -> str:
    text = repr((spec.servers, spec.network_latency_s))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def workload_fingerprint(workload: str) -> str:
    """A preset or generator spec is its own key; a file is keyed by its content."""
    p = Path(workload)
    if p.is_file():
        return "file:" + hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    return workload


def cache_key(spec: ClusterSpec, workload: str) -> str:
    return f"{CAPACITY_METHOD}|{cluster_fingerprint(spec)}|{workload_fingerprint(workload)}"


def _user_cache_path() -> Path:
    base = os.environ.get("SCALESCHED_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "scalesched"
    return root / "capacity.json"


def _read_table(text: str) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _shipped_table() -> dict[str, dict[str, Any]]:
    try:
        text = resources.files("scalesched.eval").joinpath("data", _SHIPPED).read_text()
    except FileNotFoundError:
        return {}
    return _read_table(text)


def _user_table() -> dict[str, dict[str, Any]]:
    path = _user_cache_path()
    return _read_table(path.read_text()) if path.is_file() else {}


def store_result(key: str, result: CapacityResult) -> None:
    """Add to the user cache; a cache that cannot be written costs a re-measurement only."""
    path = _user_cache_path()
    try:
        table = _user_table()
        entry = result.to_json()
        entry.pop("probes", None)
        table[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass


def cached_entry(key: str) -> dict[str, Any] | None:
    """The cached measurement under ``key`` (user cache first, then the shipped table)."""
    for table in (_user_table(), _shipped_table()):
        entry = table.get(key)
        if entry is not None and isinstance(entry.get("capacity_wps"), int | float):
            return entry
    return None


_memory: dict[str, float] = {}


def capacity_wps(
    spec: ClusterSpec,
    workload: str,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
) -> float:
    """Measured capacity of ``spec`` for ``workload`` in workflows/s, from a cache when one
    holds it (see the module docstring), else measured now and cached."""
    key = cache_key(spec, workload)
    if key in _memory:
        return _memory[key]
    entry = cached_entry(key)
    if entry is not None:
        _memory[key] = float(entry["capacity_wps"])
        return _memory[key]
    result = measure_capacity(spec, workload, on_probe=on_probe)
    store_result(key, result)
    _memory[key] = result.capacity_wps
    return result.capacity_wps


def measure_capacity(
    spec: ClusterSpec,
    workload: str,
    *,
    policies: tuple[str, ...] = CAPACITY_POLICIES,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
) -> CapacityResult:
    """Search each policy's sustainable rate by simulation (see the module docstring)."""
    from scalesched.policies import get_policy
    from scalesched.policies.features import ClusterTables
    from scalesched.sim.run import simulate
    from scalesched.sim.scenario import Scenario, build_jobs, nominal_capacity
    from scalesched.workload.source import get_workload

    wall = time.perf_counter()
    tables = ClusterTables(spec)
    nominal = nominal_capacity(tables, get_workload(workload), workload)
    if not math.isfinite(nominal) or nominal <= 0:
        raise InputError(
            workload, "tasks", "the workload puts no work on the cluster: capacity is undefined"
        )
    n_wf = workflows_for(tables.n)
    warmup, cooldown = default_warmup(n_wf), default_cooldown(n_wf)
    probes: list[dict[str, Any]] = []

    def probe(policy: str, rate: float) -> tuple[bool, float]:
        steady, delivered = True, 0.0
        for seed in CAPACITY_SEEDS:
            scenario = Scenario(workload=workload, workflows=n_wf, rate=rate, seed=seed)
            m = simulate(
                spec,
                build_jobs(tables, scenario),
                get_policy(policy),
                seed=seed,
                tables=tables,
                warmup=warmup,
                cooldown=cooldown,
            ).metrics
            steady = steady and bool(m["steady_state"])
            delivered += float(m["throughput_wps"]) / len(CAPACITY_SEEDS)
        row = {"policy": policy, "rate_wps": rate, "throughput_wps": delivered, "steady": steady}
        probes.append(row)
        if on_probe is not None:
            on_probe(row)
        return steady, delivered

    per_policy: dict[str, float] = {}
    saturated: dict[str, float] = {}
    for policy in policies:
        rate = 1.5 * nominal
        steady, delivered = probe(policy, rate)
        doublings = 0
        while steady and doublings < 6:
            rate *= 2
            steady, delivered = probe(policy, rate)
            doublings += 1
        saturated[policy] = delivered
        # Heavy overload can deliver less than the best sustainable rate (thrashing), so
        # the bracket reaches above the saturated throughput.
        lo, hi = 0.5 * delivered, 1.25 * delivered
        verified = False
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            ok, _ = probe(policy, mid)
            if ok:
                lo, verified = mid, True
            else:
                hi = mid
        while not verified and lo > 1e-3 * delivered:  # far below saturation: must keep up
            verified, _ = probe(policy, lo)
            if not verified:
                lo /= 2
        per_policy[policy] = lo
    best = max(per_policy, key=lambda p: per_policy[p])
    if not per_policy[best] > 0:
        raise InputError(
            workload,
            "capacity",
            f"no policy kept up with any rate on {spec.name} in {n_wf}-workflow runs; "
            "the workflows may be too long for the run to reach steady state",
        )
    return CapacityResult(
        cluster=spec.name,
        workload=workload,
        capacity_wps=per_policy[best],
        best_policy=best,
        per_policy_wps=per_policy,
        saturated_wps=saturated,
        nominal_wps=nominal,
        runs=len(probes),
        workflows_per_run=n_wf,
        measured_s=time.perf_counter() - wall,
        probes=probes,
    )


def store_shipped(entries: dict[str, CapacityResult], path: Path) -> None:
    """Write the shipped table (used by scripts/measure_capacity.py)."""
    table = _read_table(path.read_text()) if path.is_file() else {}
    for key, result in entries.items():
        entry = result.to_json()
        entry.pop("probes", None)
        table[key] = entry
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
