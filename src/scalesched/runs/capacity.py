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

That is the *full* method (``CAPACITY_METHOD``, 30 runs). A figure no cache holds is
measured by the *fast* method (``FAST_METHOD``), which keeps the run length (the figure
depends on it: shorter runs deliver less in their window) and saves runs:

* Screening: every policy runs once, one seed, at ``OVERLOAD`` times ``START_RATIO`` of
  the analytic estimate (the median ratio of measured to analytic capacity in the shipped
  table). The best one goes on.
* Its fixed point runs one seed a step and stops as soon as a probe settles (overloaded,
  its offer within ``SETTLE`` of ``OVERLOAD`` x what it delivered), at most
  ``SETTLE_STEPS`` steps; while no probe was only moderately overloaded, a probe that kept
  up is followed by ``CLIMB`` x its offer (bounded by the offers seen overloaded), so a
  screening far below or far above saturation (the analytic estimate is off by 0.12x to
  1.9x) still reaches the fixed point. The other seed then runs at the settled offer (or,
  unsettled, both at the next one), as every full probe averages both.
* Ranking where it matters: the policies whose screening came within ``SCREEN_MARGIN`` of
  the best run once at the best's settled offer, same seed; the one that delivers most
  there is settled too if within ``PAIR_MARGIN`` of the best. A screening offer far past
  saturation ranks a policy that thrashes there (eft) below one that does not.
* Large clusters are scaled: a cluster of ``SCALE_FROM`` servers or more whose servers are
  m copies of a smaller mix takes the capacity of the largest cached cluster of that mix
  with at least ``SCALE_MIN_BASE`` servers and at most half its size (hetero-256 for
  hetero-1024), else measures the smallest such cluster, and multiplies by the ratio of
  sizes. On the shipped full measurements the rule is off by -0.2% .. +2.0% (hetero-64
  scaled to 96, 128 and 256; docs/steady-state.md).

Results are cached by a fingerprint of the cluster's servers, of the workload spec (a
preset's name, a file's content) and of the method: first in memory, then in the user
cache file (``$SCALESCHED_CACHE_DIR`` or ``~/.cache/scalesched``), then in the table shipped
with the package for the presets the docs and tests use (``scripts/derive/measure_capacity.py``
writes it). A full-method entry is preferred to a fast one in each. The user cache is
validated entry by entry: a damaged entry is ignored with one warning and rewritten. Each
user-cache figure records the simulator that measured it (``scalesched.sim.revision``); one
of another revision defines nothing (a change that moves runs moves capacity too: a
lab's figure cached before one such change was 16% under what the simulator then measured).
The shipped table is the docs' yardstick and is read whatever revision measured it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.errors import InputError
from scalesched.plan import PLANNER_VERSION
from scalesched.runs.windows import default_cooldown, default_warmup
from scalesched.sim.revision import SIMULATOR_REVISION

if TYPE_CHECKING:  # the tables load lazily: ``--help`` and cache look-ups need none
    from scalesched.cluster.tables import ClusterTables

CAPACITY_METHOD = "saturation-fixed-point-v3"
"""The full method. Changes whenever the method changes, so stale cache entries are never
read."""
FAST_METHOD = "screened-fixed-point-v2"
"""The fast method (and the scaling rule): what a figure no cache holds is measured by."""
PLANNED_METHOD = f"planned-search-v3+{PLANNER_VERSION}"
"""The planned-deployment world's capacity (``scalesched.runs.world``): the most a plan
delivers past saturation, over the rates it is planned for (v3: probes span at least
``world.PROBE_SPAN_S`` of arrivals)."""
METHODS = ("full", "fast")
CAPACITY_SEEDS: tuple[int, ...] = (20260, 20261)
"""Workload seeds of the capacity runs (each probe averages them): disjoint from
evaluation (0-99) and validation (1000+) seeds."""
CAPACITY_POLICIES: tuple[str, ...] = ("eft", "least_loaded", "kv_aware")
"""Whose sustainable rate is measured. heft_online places like eft and p2c samples among
eft's candidates; neither sustained a higher rate than eft on the presets we measured."""
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
START_RATIO = 0.66
"""Fast method: the first offer is OVERLOAD x START_RATIO x the analytic estimate (the
median of measured / analytic over the 39 shipped full measurements; range 0.12-1.9)."""
SCREEN_MARGIN = 0.10
"""Fast method: a policy whose screening probe delivers within this fraction of the best
one's is probed again at the best's settled offer."""
SETTLE = 0.03
"""Fast method: an overloaded probe whose offer is within this fraction of OVERLOAD x what it
delivered has settled (the fixed point's next offer would be the same)."""
SETTLE_STEPS = 4
"""Fast method: one-seed steps a settling policy takes at most after its first probe."""
CLIMB = 2.0
"""Fast method: after a probe that kept up, while none was only moderately overloaded
(offer at most CLIMB x delivered), the next offer is CLIMB x its offer (at most the
geometric mean of it and the lowest offer seen overloaded)."""
PAIR_MARGIN = 0.03
"""Fast method: a policy that delivers within this fraction of the best one at the best's
settled offer (same seed) is settled too."""
SCALE_FROM = 128
"""Clusters of this many servers or more are scaled from a smaller one of the same mix."""
SCALE_MIN_BASE = 64
"""The smallest cluster capacity is scaled from: below it per-server capacity still
drifts with N (hetero-16 is 0.21 wf/s per server, hetero-64 0.18)."""

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
    """Throughput each policy delivers just past saturation (its fixed point; the fast
    method's screened-out policies: their screening probe)."""
    nominal_wps: float
    """The analytic estimate the search started from."""
    runs: int
    """Probes of the search (a probe is one run per seed it averages)."""
    workflows_per_run: int
    method: str = CAPACITY_METHOD
    measured_s: float = 0.0
    probes: list[dict[str, Any]] = field(default_factory=list)
    """Every run of the search: policy, offered rate, delivered throughput, verdict."""
    scaled_from: str | None = None
    """The smaller cluster of the same mix whose capacity was scaled (None: measured)."""
    scale_factor: float = 1.0
    """This cluster's size over ``scaled_from``'s."""
    simulator: str = SIMULATOR_REVISION
    """The simulator that measured it (``scalesched.sim.revision``): a user-cache figure of
    another is measured again."""

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


def cache_key(spec: ClusterSpec, workload: str, *, method: str = CAPACITY_METHOD) -> str:
    """The cache key of a figure: method, cluster fingerprint, workload fingerprint."""
    return f"{method}|{cluster_fingerprint(spec)}|{workload_fingerprint(workload)}"


# --------------------------------------------------------------------------- the cache

_Wps = Annotated[StrictFloat | StrictInt, Field(ge=0, le=1e7, allow_inf_nan=False)]
_Count = Annotated[StrictInt, Field(ge=0, le=10**9)]
_Text = Annotated[str, Field(max_length=4096)]


class CacheEntry(BaseModel):
    """One cached figure, as stored (``CapacityResult`` less its probes). Every field is
    checked: a hand-edited or truncated cache must cost a re-measurement, not a run at a
    nonsense rate."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: _Text
    workload: _Text
    capacity_wps: Annotated[StrictFloat | StrictInt, Field(gt=0, le=1e7, allow_inf_nan=False)]
    best_policy: _Text
    per_policy_wps: Annotated[dict[_Text, _Wps], Field(max_length=64)]
    saturated_wps: Annotated[dict[_Text, _Wps], Field(max_length=64)]
    nominal_wps: Annotated[StrictFloat | StrictInt, Field(ge=0, le=1e9, allow_inf_nan=False)]
    runs: _Count
    workflows_per_run: _Count
    method: _Text
    measured_s: Annotated[StrictFloat | StrictInt, Field(ge=0, le=1e9, allow_inf_nan=False)]
    scaled_from: _Text | None = None
    scale_factor: Annotated[StrictFloat | StrictInt, Field(gt=0, le=1e7, allow_inf_nan=False)] = 1.0
    simulator: _Text | None = None
    """None: measured before figures were stamped (shipped figures may be: they are the
    yardstick the docs were measured against, whatever simulator measured them)."""


def _warn(message: str) -> None:
    """One line on stderr: the cache is a convenience, its damage never stops a run."""
    print(f"warning: {message}", file=sys.stderr)


@dataclass
class _Table:
    """A cache file read and validated: its good entries and what was wrong with it."""

    entries: dict[str, dict[str, Any]]
    damaged: dict[str, str]
    """Key -> reason for each entry that failed validation ("" for the whole file)."""


def _parse_table(data: bytes) -> _Table:
    try:
        table = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return _Table({}, {"": "not UTF-8 text"})
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5000-digit int, nesting
        return _Table({}, {"": f"not JSON ({type(exc).__name__})"})
    if not isinstance(table, dict):
        return _Table({}, {"": f"a JSON {type(table).__name__}, not an object"})
    good: dict[str, dict[str, Any]] = {}
    damaged: dict[str, str] = {}
    for key, value in table.items():
        try:
            good[key] = CacheEntry.model_validate(value).model_dump()
        except (ValidationError, RecursionError) as exc:
            errors = exc.errors() if isinstance(exc, ValidationError) else []
            where = ".".join(str(x) for x in errors[0]["loc"]) if errors else "entry"
            damaged[key] = f"{where}: {errors[0]['msg']}" if errors else "too deeply nested"
    return _Table(good, damaged)


def cache_dir() -> Path:
    """The user's cache folder (``$SCALESCHED_CACHE_DIR`` moves it): measured capacities
    and planned deployments (``scalesched.runs.world``)."""
    base = os.environ.get("SCALESCHED_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "scalesched"


def _user_cache_path() -> Path:
    return cache_dir() / "capacity.json"


def write_json_atomically(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON through a temporary file and ``os.replace``,
    so a crash never leaves half a file; raises ``OSError`` when it cannot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1, sort_keys=True, allow_nan=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _shipped_table() -> dict[str, dict[str, Any]]:
    if not _shipped_enabled:
        return {}
    try:
        data = resources.files("scalesched.runs").joinpath("data", _SHIPPED).read_bytes()
    except FileNotFoundError:
        return {}
    return _parse_table(data).entries


_shipped_enabled = True
"""False inside :func:`ignoring_shipped_table`."""


def shipped_entry(key: str) -> dict[str, Any] | None:
    """The shipped table's entry under ``key`` (see :func:`cache_key`), or None: the
    reference a fast figure is compared with."""
    return _shipped_table().get(key)


@contextlib.contextmanager
def ignoring_shipped_table() -> Iterator[None]:
    """Within the block, answer as if the package shipped no capacity table and this process
    had looked nothing up: what the first figure costs on a cluster nobody measured. Point
    ``SCALESCHED_CACHE_DIR`` at an empty folder to leave the user cache out too."""
    global _shipped_enabled
    _memory.clear()
    _shipped_enabled = False
    try:
        yield
    finally:
        _shipped_enabled = True
        _memory.clear()  # figures found without the shipped table must not outlive the block


def _read_user_table() -> _Table:
    path = _user_cache_path()
    try:
        return _parse_table(path.read_bytes()) if path.is_file() else _Table({}, {})
    except OSError as exc:
        _warn(f"cannot read the capacity cache {path} ({exc.strerror}); ignoring it")
        return _Table({}, {})


def _write_user_table(entries: dict[str, dict[str, Any]]) -> bool:
    """Replace the user cache atomically (temp file + os.replace); a cache that cannot be
    written is a warning and costs a re-measurement next time, never an error."""
    path = _user_cache_path()
    try:
        write_json_atomically(path, entries)
    except OSError as exc:
        _warn(
            f"cannot write the capacity cache {path} ({exc.strerror or exc}); "
            "the figure will be measured again next time"
        )
        return False
    return True


_warned: set[tuple[str, str]] = set()


def _user_table(asked: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The user cache's valid entries of this simulator. Damage is reported once per entry
    (or file) and repaired at once: the file is rewritten with only the valid entries. An
    entry another simulator measured (``simulator``, ``scalesched.sim.revision``) is left
    out, with one note where it is ``asked`` for, and dropped at the next write."""
    table = _read_user_table()
    path = str(_user_cache_path())
    if table.damaged:
        for key, reason in table.damaged.items():
            if (path, key) not in _warned:
                _warned.add((path, key))
                what = f"entry {key!r}" if key else "file"
                _warn(f"ignoring a damaged capacity cache {what} in {path} ({reason})")
        _write_user_table(table.entries)
    current = {k: e for k, e in table.entries.items() if e["simulator"] == SIMULATOR_REVISION}
    for key in asked:
        if key in table.entries and key not in current and (path, key) not in _warned:
            _warned.add((path, key))
            entry = table.entries[key]
            print(
                f"note: {path} holds a capacity of {entry['cluster']} for {entry['workload']} "
                "measured by another simulator revision; it is not used",
                file=sys.stderr,
            )
    return current


def store_result(key: str, result: CapacityResult) -> None:
    """Add to the user cache; a cache that cannot be written costs a re-measurement only."""
    entry = result.to_json()
    entry.pop("probes", None)
    entries = _user_table()
    entries[key] = CacheEntry.model_validate(entry).model_dump()
    _write_user_table(entries)


def cached_entry(key: str) -> dict[str, Any] | None:
    """The cached measurement under ``key`` (user cache first, then the shipped table)."""
    for table in (_user_table((key,)), _shipped_table()):
        if key in table:
            return table[key]
    return None


@dataclass(frozen=True)
class Found:
    """A cached figure and where it came from."""

    entry: dict[str, Any]
    source: str
    """"memory", "user cache" or "shipped table"."""
    key: str


_memory: dict[str, Found] = {}
"""Figures this process has already looked up or measured, by full-method key."""


def lookup(spec: ClusterSpec, workload: str) -> Found | None:
    """The cached figure of (spec, workload): user cache then shipped table, a full-method
    entry before a fast one in each; None when neither holds one."""
    keys = [cache_key(spec, workload, method=m) for m in (CAPACITY_METHOD, FAST_METHOD)]
    tables = (("user cache", _user_table(tuple(keys))), ("shipped table", _shipped_table()))
    for source, table in tables:
        for key in keys:
            if key in table:
                return Found(table[key], source, key)
    return None


# ------------------------------------------------------------------ announcing a measurement


def estimated_seconds(n_servers: int, workflows: int, runs: int) -> float:
    """A rough wall time for ``runs`` simulated runs (seconds per workflow grow with the
    cluster: eft looks at every server; fitted to the shipped table's agentic-mix times)."""
    return runs * workflows * (0.4e-3 + 0.04e-3 * n_servers)


class Reporter:
    """Tells the user a measurement is under way: one notice line on stderr, then (on a
    terminal) a progress bar over the planned runs. Library callers get the notice too: a
    silent minute-long stall before the first simulated workflow is the bug it fixes."""

    def __init__(self, *, bar: bool | None = None, verbose: bool = False) -> None:
        self.bar = sys.stderr.isatty() if bar is None else bar
        self.verbose = verbose
        self._progress: Any = None
        self._task: Any = None

    def started(self, notice: str, planned_runs: int) -> None:
        print(notice, file=sys.stderr, flush=True)
        if self.bar:
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(console=Console(stderr=True), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("capacity probes", total=planned_runs)

    def probed(self, row: dict[str, Any], runs: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=runs)
            if self.verbose:
                self._progress.console.print(_probe_line(row))
        elif self.verbose:
            print(_probe_line(row), file=sys.stderr, flush=True)

    def finished(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _probe_line(row: dict[str, Any]) -> str:
    verdict = "keeps up" if row["throughput_wps"] >= KEPT_UP * row["rate_wps"] else "overloaded"
    return (
        f"  {row['policy']:>13} at {row['rate_wps']:.3g} wf/s: delivers "
        f"{row['throughput_wps']:.3g} wf/s, {verdict}"
    )


# ------------------------------------------------------------------------ the search


def probe_throughput(
    job_tables: ClusterTables,
    run_tables: ClusterTables,
    workload: str,
    policy: str,
    rate: float,
    workflows: int,
    seeds: tuple[int, ...] = CAPACITY_SEEDS,
) -> tuple[float, bool]:
    """The window throughput of ``policy`` offered ``rate`` (averaged over ``seeds``) and
    whether every run was steady: one capacity probe. Jobs are built on ``job_tables`` (the
    plain cluster) and run on ``run_tables`` (the same, or under a planned deployment), with
    the fixed 20% warm-up and 10% run-out: a probe is overloaded on purpose, which MSER is
    not for."""
    from scalesched.policies import get_policy
    from scalesched.sim.run import simulate
    from scalesched.sim.scenario import Scenario, build_jobs, stream_jobs, streams_by_default

    warmup, cooldown = default_warmup(workflows), default_cooldown(workflows)
    steady, delivered = True, 0.0
    for seed in seeds:
        scenario = Scenario(workload=workload, workflows=workflows, rate=rate, seed=seed)
        realise = stream_jobs if streams_by_default(scenario) else build_jobs
        m = simulate(
            run_tables.spec,
            realise(job_tables, scenario),
            get_policy(policy),
            seed=seed,
            tables=run_tables,
            warmup=warmup,
            cooldown=cooldown,
        ).metrics
        steady = steady and bool(m["steady_state"])
        delivered += float(m["throughput_wps"]) / len(seeds)
    return delivered, steady


class _Prober:
    """Runs probes of one (cluster, workload) and records them."""

    def __init__(
        self,
        spec: ClusterSpec,
        workload: str,
        on_probe: Callable[[dict[str, Any]], None] | None,
        reporter: Reporter | None,
    ) -> None:
        from scalesched.cluster.tables import ClusterTables
        from scalesched.sim.scenario import nominal_capacity
        from scalesched.workload.source import get_workload

        self.tables = ClusterTables(spec)
        self.workload = workload
        self.nominal = nominal_capacity(self.tables, get_workload(workload), workload)
        if not math.isfinite(self.nominal) or self.nominal <= 0:
            raise InputError(
                workload, "tasks", "the workload puts no work on the cluster: capacity is undefined"
            )
        self.n_wf = workflows_for(self.tables.n)
        self.on_probe, self.reporter = on_probe, reporter
        self.probes: list[dict[str, Any]] = []
        self.runs = 0

    def __call__(self, policy: str, rate: float, seeds: tuple[int, ...] = CAPACITY_SEEDS) -> float:
        """The window throughput of ``policy`` offered ``rate``, averaged over ``seeds``."""
        delivered, steady = probe_throughput(
            self.tables, self.tables, self.workload, policy, rate, self.n_wf, seeds
        )
        self.runs += len(seeds)
        row = {
            "policy": policy,
            "rate_wps": rate,
            "throughput_wps": delivered,
            "steady": steady,
            "seeds": len(seeds),
        }
        self.probes.append(row)
        if self.on_probe is not None:
            self.on_probe(row)
        if self.reporter is not None:
            self.reporter.probed(row, len(seeds))
        return delivered


COLLAPSED_STEP = 0.25
"""A probe that completed nothing in its window (a collapse: on one-fast-16 tool-heavy
with models loaded on demand, every policy's first probe at 1.25x the analytic estimate
thrashes the one H100 server) says only that the offer is far past saturation; the next
offer is at most this share of it, never a rate of 0 that no probe can run. The figure of
such a probe stays 0 (it ranks last)."""


def next_estimate(offered: float, delivered: float) -> float:
    """The fixed point's step: the offer if the run kept up, else what it delivered."""
    return offered if delivered >= KEPT_UP * offered else delivered


def _next_offer_from(offered: float, delivered: float) -> float:
    """OVERLOAD x the fixed point's estimate, or a share of the offer after a collapse."""
    estimate = next_estimate(offered, delivered)
    return OVERLOAD * estimate if estimate > 0 else COLLAPSED_STEP * offered


def _full_search(prober: _Prober, policies: tuple[str, ...]) -> tuple[dict[str, float], str]:
    per_policy: dict[str, float] = {}
    for policy in policies:
        # Fixed point of "offer 25% more than the estimate, take what is delivered": it
        # settles at the throughput the policy delivers just past saturation.
        offered = OVERLOAD * prober.nominal
        for step in range(FIXED_POINT_STEPS):
            delivered = prober(policy, offered)
            estimate = next_estimate(offered, delivered)
            if step + 1 < FIXED_POINT_STEPS:
                offered = _next_offer_from(offered, delivered)
        per_policy[policy] = estimate
    return per_policy, max(per_policy, key=lambda p: per_policy[p])


def _settled(offered: float, delivered: float) -> bool:
    """A probe at the fixed point: overloaded, and its offer within ``SETTLE`` of OVERLOAD x
    what it delivered (the full method's next offer would be this one again)."""
    overloaded = delivered < KEPT_UP * offered
    return overloaded and abs(OVERLOAD * delivered / offered - 1) <= SETTLE


def _near(offered: float, delivered: float) -> bool:
    """Overloaded, but not by more than CLIMB: the fixed point is close."""
    return delivered < KEPT_UP * offered and offered <= CLIMB * delivered


@dataclass(frozen=True)
class _Settled:
    figure: float
    """The fixed point's step over every seed at ``offered``."""
    offered: float
    first: float
    """What the first seed delivered at ``offered`` (for a paired comparison there)."""


def _settle(prober: _Prober, policy: str, offered: float, delivered: float) -> _Settled:
    """The fast fixed point of ``policy`` from one probe (``offered``, ``delivered``) on the
    first seed: one seed a step until a probe settles (at most SETTLE_STEPS steps), then the
    other seeds at the settled offer, or, unsettled, every seed at the next offer. The
    figure is a probe over every seed, as each full probe is.

    While no probe has been only moderately overloaded, a probe that kept up is followed by
    CLIMB x its offer, not OVERLOAD x, but never past the geometric mean of its offer and
    the lowest offer seen overloaded: climbing out of a collapsed first probe (eft offered
    7.5 wf/s on mix-l4-edge-16's plan-execute delivers 0.77, under half of the 1.7 it
    sustains) at 25% a step took the whole budget, and the figure was read on the way up,
    short of the fixed point; the bound keeps a policy that thrashes from climbing back
    into the collapse."""
    first, others = CAPACITY_SEEDS[:1], CAPACITY_SEEDS[1:]
    near = _near(offered, delivered)
    ceiling = math.inf if delivered >= KEPT_UP * offered else offered
    for _ in range(SETTLE_STEPS):
        if _settled(offered, delivered):
            break
        if delivered >= KEPT_UP * offered and not near:
            offered = min(CLIMB * offered, math.sqrt(offered * ceiling))
        else:
            offered = _next_offer(offered, delivered)
        delivered = prober(policy, offered, first)
        near = near or _near(offered, delivered)
        if delivered < KEPT_UP * offered:
            ceiling = min(ceiling, offered)
    if not _settled(offered, delivered):
        offered = _next_offer(offered, delivered)
        delivered = prober(policy, offered, first)
    mean = delivered
    if others:
        rest = prober(policy, offered, others)
        mean = (delivered * len(first) + rest * len(others)) / len(CAPACITY_SEEDS)
    return _Settled(next_estimate(offered, mean), offered, delivered)


def _next_offer(offered: float, delivered: float) -> float:
    """The full method's next offer after a probe: OVERLOAD x its estimate (a share of the
    offer after a collapse, ``COLLAPSED_STEP``)."""
    return _next_offer_from(offered, delivered)


def _fast_search(prober: _Prober, policies: tuple[str, ...]) -> tuple[dict[str, float], str]:
    """Screen every policy with one probe and settle the best. Then probe the policies whose
    screening came within SCREEN_MARGIN of it at the best's settled offer, on the same seed:
    a paired comparison where it matters, just past saturation, and not at a screening offer
    that may be far from it (a policy that thrashes reads low far past saturation). The one
    that delivers most there is settled too if it comes within PAIR_MARGIN of the best. The
    capacity is the best settled figure (a screening figure is one seed's: not comparable)."""
    seed = CAPACITY_SEEDS[:1]
    offered = OVERLOAD * START_RATIO * prober.nominal
    screened = {p: prober(p, offered, seed) for p in policies}
    # Ranked by estimate: a probe that kept up says "at least the offer", and what it
    # delivered above the offer (a backlog cleared in the window) is not a higher figure.
    per_policy = {p: next_estimate(offered, screened[p]) for p in policies}
    ranked = sorted(policies, key=lambda p: -per_policy[p])
    close = [p for p in ranked[1:] if per_policy[p] >= (1 - SCREEN_MARGIN) * per_policy[ranked[0]]]
    best = _settle(prober, ranked[0], offered, screened[ranked[0]])
    per_policy[ranked[0]] = best.figure
    paired = {
        p: screened[p] if best.offered == offered else prober(p, best.offered, seed) for p in close
    }
    settled = [ranked[0]]
    rivals = [p for p in paired if paired[p] >= (1 - PAIR_MARGIN) * best.first]
    if rivals:
        rival = max(rivals, key=lambda p: paired[p])
        per_policy[rival] = _settle(prober, rival, best.offered, paired[rival]).figure
        settled.append(rival)
    return per_policy, max(settled, key=lambda p: per_policy[p])


def planned_runs(method: str, n_policies: int) -> int:
    """Runs a search plans: the full method's exactly, the fast one's at most (it stops as
    soon as it settles)."""
    seeds = len(CAPACITY_SEEDS)
    if method == "full":
        return n_policies * FIXED_POINT_STEPS * seeds
    settle = SETTLE_STEPS + seeds
    return n_policies + settle + (n_policies - 1) + (settle if n_policies > 1 else 0)


def measure_capacity(
    spec: ClusterSpec,
    workload: str,
    *,
    policies: tuple[str, ...] = CAPACITY_POLICIES,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    method: str = "full",
    reporter: Reporter | None = None,
) -> CapacityResult:
    """Search each policy's sustainable rate by simulation (see the module docstring):
    ``method`` "full" (the shipped table's method) or "fast" (screened, early-stopped)."""
    if method not in METHODS:
        raise InputError("--method", "method", f"expected one of {', '.join(METHODS)}")
    wall = time.perf_counter()
    prober = _Prober(spec, workload, on_probe, reporter)
    if reporter is not None:
        runs = planned_runs(method, len(policies))
        reporter.started(_notice(spec, workload, prober.n_wf, runs), runs)
    try:
        search = _full_search if method == "full" else _fast_search
        per_policy, best = search(prober, policies)
    finally:
        if reporter is not None:
            reporter.finished()
    if not per_policy[best] > 0:
        raise InputError(
            workload,
            "capacity",
            f"no policy completed a workflow inside the measurement window on {spec.name} in "
            f"{prober.n_wf}-workflow runs; the workflows are too long for runs of this size",
        )
    return CapacityResult(
        cluster=spec.name,
        workload=workload,
        capacity_wps=per_policy[best],
        best_policy=best,
        per_policy_wps=per_policy,
        saturated_wps=dict(per_policy),
        nominal_wps=prober.nominal,
        runs=len(prober.probes),
        workflows_per_run=prober.n_wf,
        method=CAPACITY_METHOD if method == "full" else FAST_METHOD,
        measured_s=time.perf_counter() - wall,
        probes=prober.probes,
    )


def _notice(spec: ClusterSpec, workload: str, workflows: int, runs: int) -> str:
    seconds = estimated_seconds(len(spec), workflows, runs)
    about = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    return f"measuring capacity of {spec.name} for {workload} (about {about}; cached afterwards)"


# ------------------------------------------------------------------------ scaling


def _mix(spec: ClusterSpec) -> tuple[list[ServerSpec], dict[ServerSpec, int], int]:
    """The servers' types (a server less its name) in first-seen order, their counts and
    the gcd of the counts: the cluster is ``gcd`` copies of a primitive mix."""
    counts: dict[ServerSpec, int] = {}
    for server in spec.servers:
        kind = dataclasses.replace(server, name="")
        counts[kind] = counts.get(kind, 0) + 1
    return list(counts), counts, math.gcd(*counts.values())


_PRESET = re.compile(r"^(hetero|homogeneous)-(\d+)(:.+)?$")


def sub_cluster(spec: ClusterSpec, size: int) -> ClusterSpec:
    """The first ``size`` servers of ``spec`` taken type by type in proportion (hetero-64 is
    hetero-1024's sub-cluster of 64, server for server); ``size`` must keep the mix exact."""
    _, counts, _ = _mix(spec)
    n = len(spec)
    quota = {kind: count * size // n for kind, count in counts.items()}
    if any(q * n != c * size for q, c in zip(quota.values(), counts.values(), strict=True)):
        raise ValueError(f"{size} servers cannot keep the mix of {spec.name}")
    kept: list[ServerSpec] = []
    for server in spec.servers:
        kind = dataclasses.replace(server, name="")
        if quota[kind] > 0:
            quota[kind] -= 1
            kept.append(server)
    m = _PRESET.match(spec.name)
    name = f"{m.group(1)}-{size}{m.group(3) or ''}" if m else f"{spec.name}[{size} of {n}]"
    return ClusterSpec(name=name, servers=tuple(kept), network_latency_s=spec.network_latency_s)


def scale_bases(spec: ClusterSpec) -> list[int]:
    """Sizes capacity may be scaled from, largest first: exact copies of the mix with at
    least SCALE_MIN_BASE servers and at most half of ``spec``'s (empty: measure it)."""
    n = len(spec)
    if n < SCALE_FROM:
        return []
    _, _, copies = _mix(spec)
    unit = n // copies
    return [m * unit for m in range(copies // 2, 0, -1) if SCALE_MIN_BASE <= m * unit <= n // 2]


def _scaled(base: CapacityResult | dict[str, Any], spec: ClusterSpec, size: int) -> CapacityResult:
    b = base.to_json() if isinstance(base, CapacityResult) else dict(base)
    factor = len(spec) / size
    return CapacityResult(
        cluster=spec.name,
        workload=b["workload"],
        capacity_wps=b["capacity_wps"] * factor,
        best_policy=b["best_policy"],
        per_policy_wps={p: v * factor for p, v in b["per_policy_wps"].items()},
        saturated_wps={p: v * factor for p, v in b["saturated_wps"].items()},
        nominal_wps=b["nominal_wps"] * factor,
        runs=0,
        workflows_per_run=b["workflows_per_run"],
        method=FAST_METHOD,
        measured_s=0.0,
        scaled_from=f"{b['cluster']} ({b['method']})",
        scale_factor=factor,
    )


def estimate_capacity(
    spec: ClusterSpec,
    workload: str,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    reporter: Reporter | None = None,
) -> CapacityResult:
    """The fast method: scaled from a cached smaller cluster of the same mix, else from one
    measured now (and cached too), else measured directly (see the module docstring)."""
    wall = time.perf_counter()
    sizes = scale_bases(spec)
    for size in sizes:
        found = lookup(sub_cluster(spec, size), workload)
        if found is not None and found.entry.get("scaled_from") is None:
            return _scaled(found.entry, spec, size)
    if not sizes:
        return measure_capacity(spec, workload, on_probe=on_probe, method="fast", reporter=reporter)
    base_spec = sub_cluster(spec, sizes[-1])
    base = measure_capacity(
        base_spec, workload, on_probe=on_probe, method="fast", reporter=reporter
    )
    store_result(cache_key(base_spec, workload, method=FAST_METHOD), base)
    scaled = _scaled(base, spec, sizes[-1])
    return dataclasses.replace(scaled, measured_s=time.perf_counter() - wall, probes=base.probes)


# ------------------------------------------------------------------------ the entry point


def capacity_wps(
    spec: ClusterSpec,
    workload: str,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    reporter: Reporter | None = None,
) -> float:
    """Measured capacity of ``spec`` for ``workload`` in workflows/s, from a cache when one
    holds it (see the module docstring), else estimated now by the fast method (a notice and
    progress on stderr: ``reporter``, default ``Reporter()``) and cached."""
    return capacity_found(spec, workload, on_probe=on_probe, reporter=reporter).entry[
        "capacity_wps"
    ]


def capacity_found(
    spec: ClusterSpec,
    workload: str,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    reporter: Reporter | None = None,
) -> Found:
    """:func:`capacity_wps` with the whole entry and where it came from ("measured now"
    when no cache held it)."""
    key = cache_key(spec, workload)
    if key in _memory:
        hit = _memory[key]
        return Found(hit.entry, "memory", hit.key)
    found = lookup(spec, workload)
    if found is None:
        result = estimate_capacity(
            spec, workload, on_probe=on_probe, reporter=reporter or Reporter()
        )
        fast_key = cache_key(spec, workload, method=FAST_METHOD)
        store_result(fast_key, result)
        entry = result.to_json()
        entry.pop("probes", None)
        found = Found(entry, "measured now", fast_key)
    _memory[key] = found
    return found


def store_shipped(entries: dict[str, CapacityResult], path: Path) -> None:
    """Write the shipped table (used by scripts/derive/measure_capacity.py)."""
    table = _parse_table(path.read_bytes()).entries if path.is_file() else {}
    # Entries of an older method can never be read again: drop them.
    current = (CAPACITY_METHOD + "|", FAST_METHOD + "|", PLANNED_METHOD + "|")
    table = {k: v for k, v in table.items() if k.startswith(current)}
    for key, result in entries.items():
        entry = result.to_json()
        entry.pop("probes", None)
        table[key] = CacheEntry.model_validate(entry).model_dump()
    path.write_text(json.dumps(table, indent=1, sort_keys=True, allow_nan=False) + "\n")


def capacity_report(
    spec: ClusterSpec,
    workload: str,
    *,
    remeasure: bool = False,
    method: str = "fast",
    verbose: bool = False,
) -> dict[str, Any]:
    """What ``scalesched capacity`` prints: the figure, how it was measured, where it came
    from (``source``) and ``cached`` (true only when a cache answered)."""
    reporter = Reporter(verbose=verbose)
    if remeasure:
        if method not in METHODS:
            raise InputError("--method", "method", f"expected one of {', '.join(METHODS)}")
        if method == "full":
            result = measure_capacity(spec, workload, method="full", reporter=reporter)
            key = cache_key(spec, workload)
        else:
            result = estimate_capacity(spec, workload, reporter=reporter)
            key = cache_key(spec, workload, method=FAST_METHOD)
        store_result(key, result)
        _memory.pop(cache_key(spec, workload), None)
        entry = result.to_json()
        entry.pop("probes", None)
        found = Found(entry, "measured now", key)
    else:
        found = capacity_found(spec, workload, reporter=reporter)
    payload: dict[str, Any] = dict(found.entry)
    payload["source"] = found.source
    payload["cached"] = found.source != "measured now"
    return payload
