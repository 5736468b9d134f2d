"""Measured capacity: the arrival rate a cluster sustains for a workload.

``--load`` is a fraction of this figure, so load 0.9 means "90% of what the best heuristic
keeps up with", whatever the cluster's mix. The analytic estimate that came before
(``nominal_capacity``: bottleneck GPU-seconds at a reference batch) was off by up to 2x in
both directions on our presets (a 70B model that fits only some servers is a bottleneck the
aggregate cannot see; continuous batching makes H100 servers faster than the reference
batch assumes), so it now only seeds the search.

Method (docs/steady-state.md): capacity is the throughput the best heuristic delivers
just past saturation, measured where it is least noisy.

* Near saturation a run's steady-state verdict is noise (a window of a few response times
  cannot tell a queue that grows by a few percent from one that fluctuates): a bisection
  on it under-estimated hetero-48 by a third. Past saturation the cluster is backlogged
  and the window throughput is a tight estimate of the service rate.
* Far past saturation some policies thrash (eft on hetero-48 delivers 6.8 wf/s when
  offered 18 and 8.8 when offered 11), so the probe must be only just past it.
* Hence a fixed point per policy of ``CAPACITY_POLICIES``: offer ``OVERLOAD`` (1.25) times
  the current estimate (starting from the analytic one); if the run's window throughput
  keeps up (>= 97% of the offer), the offer becomes the estimate, else the delivered
  throughput does; five steps. Each probe averages two seeds (``CAPACITY_SEEDS``) of
  ``workflows_for`` workflows with 20% warm-up and 10% cool-down excluded.
* Capacity is the highest of those rates over the policies. Fixed seeds make capacity a
  property of (cluster, workload) alone: every run seed sees the same arrival rate at a
  given load.

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

CAPACITY_METHOD = "saturation-fixed-point-v3"
"""Changes whenever the method changes, so stale cache entries are never read."""
CAPACITY_SEEDS: tuple[int, ...] = (20260, 20261)
"""Workload seeds of the capacity runs (each probe averages them): disjoint from
evaluation (0-99) and validation (1000+) seeds."""
CAPACITY_POLICIES: tuple[str, ...] = ("eft", "least_loaded", "kv_aware")
"""Whose sustainable rate is measured. heft_online places like eft and p2c samples among
eft's candidates; neither sustained a higher rate than eft on the presets we measured."""
WARMUP_FRACTION = 0.2
COOLDOWN_FRACTION = 0.1
OVERLOAD = 1.25
"""Each probe offers this multiple of the current estimate."""
KEPT_UP = 0.97
"""A probe whose window throughput reaches this fraction of the offered rate kept up: the
estimate rises to the offered rate."""
FIXED_POINT_STEPS = 5
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
    """Throughput each policy delivers just past saturation (its fixed point)."""
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
    from scalesched.cluster.tables import ClusterTables
    from scalesched.runs.setup import Scenario, prepare, run
    from scalesched.sim.scenario import nominal_capacity
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
            setup = prepare(tables, scenario)
            m = run(setup, policy, warmup=warmup, cooldown=cooldown).metrics
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
        # Fixed point of "offer 25% more than the estimate, take what is delivered": it
        # settles at the throughput the policy delivers just past saturation.
        estimate = nominal
        for _ in range(FIXED_POINT_STEPS):
            offered = OVERLOAD * estimate
            _, delivered = probe(policy, offered)
            estimate = offered if delivered >= KEPT_UP * offered else delivered
        per_policy[policy] = saturated[policy] = estimate
    best = max(per_policy, key=lambda p: per_policy[p])
    if not per_policy[best] > 0:
        raise InputError(
            workload,
            "capacity",
            f"no policy completed a workflow inside the measurement window on {spec.name} in "
            f"{n_wf}-workflow runs; the workflows are too long for runs of this size",
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
    # Entries of an older method can never be read again: drop them.
    table = {k: v for k, v in table.items() if k.startswith(CAPACITY_METHOD + "|")}
    for key, result in entries.items():
        entry = result.to_json()
        entry.pop("probes", None)
        table[key] = entry
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
