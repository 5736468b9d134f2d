"""Which core runs the simulator: the compiled core (the default where the install built
it) or the pure-Python engine (the executable specification, and the fallback:
``SCALESCHED_CORE=python`` in the environment, or ``Simulation(core="python")``).

The compiled core is C++ built by the package's own build (``CMakeLists.txt``,
``src/scalesched/sim/_core``, nanobind). Each compiled piece must give the Python engine's
traces bit for bit, so switching the core on changes speed, never results. Compiled:

* whole runs (``sim.compiled_run``, ``_core/event_core.hpp``): the event loop, the
  execution model and the books in C++, with ``eft``, ``tail``, ``least_loaded``,
  ``kv_aware``, ``fcfs_workflow`` or ``plas`` answering every decision there, for a fresh
  run without the caches, hedges or replica actions (the common case: what ``simulate``,
  ``eval``, capacity and the studies run); and rollout's trials, from a run under way
  taken over at an open decision and copied per candidate (``compiled_trials``);
* for every other run, the pieces below, called from the Python event loop:
* the decision build: ``make_decision`` and ``transfer_times`` (``decision.features``),
  every per-server array of a ``Decision`` computed in one C++ loop instead of some forty
  numpy calls (``make_decision_compiled``);
* the task request: ``RunTasks.request`` / ``kernel.requests.task_request``, the
  ``TaskRequest`` a scheduler is shown, built in C++ from the same objects
  (``task_request_compiled``);
* the per-workflow estimates: the two bounds fixed at a job's arrival
  (``kernel.records.job_bounds``: ``lower_bound`` and ``any_deployment_lower_bound``) and
  HEFT's mean costs behind the ranks (``kernel.ranks.mean_task_costs``), the same doubles
  (``job_bounds_compiled``, ``mean_task_costs_compiled``);
* eft's choice: ``policies.eft.eft_choice`` on a compiled decision, numpy's argmin rules
  in C++ (``eft_choice_compiled``).

Still Python: the event loop of runs the whole-run path does not cover (the other
policies, caches, hedges, sampled futures, the Gym env), the upward ranks and tail's
predictor (asked once per workflow by a whole run).

Why both: the pure-Python engine stays the reference the compiled pieces are tested
against (``tests/sim/test_compiled_core.py``, ``tests/sim/test_compiled_run.py``), and an
install without a C++ compiler has no compiled core at all: it runs the Python engine,
with one warning.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from scalesched.cluster.anywhere import AnyDeployment, any_deployment
from scalesched.cluster.perf import EnginePerf
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.decision.features import ClusterStateView, Decision, TaskRequest, make_decision
from scalesched.workload.instance import Job, WorkflowInstance

if TYPE_CHECKING:
    from scalesched.kernel.ledger import PerId, RunTasks
    from scalesched.sim._simcore import DecisionCore, RequestBuilder, TaskCosts

CORE_ENV = "SCALESCHED_CORE"
"""Environment variable choosing the core when ``Simulation(core=...)`` is not given."""

CoreName = Literal["python", "compiled"]
CORES: tuple[CoreName, ...] = ("python", "compiled")

DecisionBuilder = Callable[..., Decision]
"""``make_decision``'s signature: ``(tables, view, task, *, transfer=None) -> Decision``."""

_warned = False


def _load_extension() -> object | None:
    """The compiled module, or None where the install has none (built without a compiler,
    or ``SCALESCHED_NO_COMPILE=1``)."""
    try:
        from scalesched.sim import _simcore
    except ImportError:
        return None
    return _simcore


_EXTENSION = _load_extension()


def compiled_available() -> bool:
    """Whether this install has the compiled core."""
    return _EXTENSION is not None


def resolve_core(core: str | None = None) -> CoreName:
    """The core a simulation runs on: ``core`` if given, else ``$SCALESCHED_CORE``, else
    ``compiled``. ``compiled`` without the compiled module falls back to ``python`` and
    warns (once per process: a run makes many simulations, forks and rollouts)."""
    global _warned
    name = core if core is not None else (os.environ.get(CORE_ENV) or "compiled")
    if name not in CORES:
        source = "core" if core is not None else CORE_ENV
        raise ValueError(f"{source}={name!r}: expected one of {', '.join(CORES)}")
    if name == "compiled" and _EXTENSION is None:
        if not _warned:
            _warned = True
            warnings.warn(
                "scalesched: the compiled simulation core is not built in this install (no "
                "C++ compiler at install time?); running the pure-Python engine (the same "
                "results, up to 20x slower; SCALESCHED_CORE=python says so and stays quiet)",
                RuntimeWarning,
                stacklevel=2,
            )
        return "python"
    return cast(CoreName, name)


def decision_builder(core: CoreName) -> DecisionBuilder:
    """The function that builds a ``Decision`` on this core."""
    return make_decision_compiled if core == "compiled" else make_decision


# -- the compiled decision build ------------------------------------------------------------

_BOUND: weakref.WeakKeyDictionary[ClusterTables, DecisionCore] = weakref.WeakKeyDictionary()
"""The compiled tables of each ``ClusterTables`` (bound once; weak, and kept off the tables
so that pickling or deep-copying them never meets a C++ object)."""


def _bind(tables: ClusterTables) -> DecisionCore:
    """The C++ view of ``tables``: it reads the same arrays the Python build reads, in place
    (an in-place change of the decode tables, ``eval.drift``, shows through to both)."""
    assert _EXTENSION is not None
    cols = tables._model_cols
    core: DecisionCore = _EXTENSION.DecisionCore(  # type: ignore[attr-defined]
        tables.n,
        np.ascontiguousarray(tables.decode_attn, dtype=np.float64),
        tables._lin_flat,
        tables._increase_flat,
        np.ascontiguousarray(tables.kv_capacity, dtype=np.int64),
        np.ascontiguousarray(tables.max_batch, dtype=np.int64),
        tables.nic_bytes_per_s,
        float(tables.latency_s),
        tables.cores,
        tables.core_speed,
        [c.mask for c in cols],
        [c.masked_out is None for c in cols],
        [c.kk for c in cols],
        [c.base for c in cols],
        [c.load for c in cols],
        [c.tp for c in cols],
    )
    _BOUND[tables] = core
    return core


def check_bindable(tables: ClusterTables) -> None:
    """Raise if the compiled build would read a copy of a table the Python build reads in
    place (a dtype it converted): an in-place change would then not show through."""
    for name in ("decode_attn", "kv_capacity", "max_batch"):
        arr = getattr(tables, name)
        want = np.float64 if name == "decode_attn" else np.int64
        if arr.dtype != want or not arr.flags.c_contiguous:
            raise TypeError(f"compiled core: tables.{name} must be C-contiguous {want.__name__}")
    assert len(tables._model_cols) == len(MODEL_NAMES)


def decision_core(tables: ClusterTables) -> DecisionCore:
    """The compiled tables of ``tables`` (bound on first use)."""
    core = _BOUND.get(tables)
    if core is None:
        check_bindable(tables)
        core = _bind(tables)
    return core


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class CompiledDecision(Decision):
    """A ``Decision`` built by the compiled core: the same fields, bit for bit; its
    ``at_output_tokens`` (tail's quantile, hedging's spread) builds on the compiled core
    too."""

    def _built_again(self, task: TaskRequest) -> Decision:
        return make_decision_compiled(self._tables, self._view, task, transfer=self.transfer_s)


def eft_choice_compiled(decision: Decision) -> int | None:
    """eft's answer (``policies.eft.eft_choice``) on the compiled core, from the decision's
    arrays as they are now (a caller may have changed them since the build); None when
    they are not plain (n,) bool and float64 arrays (numpy then answers)."""
    assert _EXTENSION is not None
    try:
        at: int = _EXTENSION.eft_choice(  # type: ignore[attr-defined]
            decision.mask, decision.finish_s, decision.imposed_s
        )
    except TypeError:
        return None
    return at if at >= 0 else None


def make_decision_compiled(
    tables: ClusterTables,
    view: ClusterStateView,
    task: TaskRequest,
    *,
    transfer: np.ndarray | None = None,
) -> Decision:
    """``make_decision`` on the compiled core: the same arrays, bit for bit (the C++ keeps
    numpy's operations, order and types; ``sim/_core/decision.hpp``). The shared arrays
    (the model's mask, the tables' zeros, the view's batch column) are the same objects the
    Python build returns."""
    core = decision_core(tables)
    if task.kind == "llm":
        return _llm_decision(core, tables, view, task, transfer)
    return _tool_decision(core, tables, view, task, transfer)


def _llm_decision(
    core: DecisionCore,
    tables: ClusterTables,
    view: ClusterStateView,
    task: TaskRequest,
    transfer: np.ndarray | None,
) -> Decision:
    m = task.model
    out = np.empty((7, tables.n))
    core.llm_view(view, task, tables.prefill_by_class(m, task.prompt_tokens), out, transfer)
    computed, wait, load, exec_s, finish, imposed, resident = out
    return CompiledDecision(
        now=view.now,
        task=task,
        mask=tables._model_cols[m].mask,
        transfer_s=transfer if transfer is not None else computed,
        wait_s=wait,
        load_s=load,
        exec_s=exec_s,
        finish_s=finish,
        imposed_s=imposed,
        est_work=view.est_work,
        n_assigned=view.n_assigned,
        _tables=tables,
        _view=view,
        _resident=resident,
        _batch=view.engine_batch[:, m],
    )


def _tool_decision(
    core: DecisionCore,
    tables: ClusterTables,
    view: ClusterStateView,
    task: TaskRequest,
    transfer: np.ndarray | None,
) -> Decision:
    out = np.empty((5, tables.n))
    core.tool_view(view, task, out, transfer)
    computed, wait, _, exec_s, finish = out
    zeros = tables.zeros
    return CompiledDecision(
        now=view.now,
        task=task,
        mask=tables.all_servers,
        transfer_s=transfer if transfer is not None else computed,
        wait_s=wait,
        load_s=zeros,
        exec_s=exec_s,
        finish_s=finish,
        imposed_s=zeros,
        est_work=view.est_work,
        n_assigned=view.n_assigned,
        _tables=tables,
        _view=view,
        _resident=zeros,
        _batch=zeros,
    )


# -- the compiled per-workflow estimates ---------------------------------------------------

_COSTS: weakref.WeakKeyDictionary[ClusterTables, tuple[AnyDeployment, TaskCosts]] = (
    weakref.WeakKeyDictionary()
)
"""The compiled estimates of each ``ClusterTables`` with the ``AnyDeployment`` they were
bound with (weak, off the tables: as ``_BOUND``)."""


def _prefill_spec(engine: object) -> tuple[object, bool, list[float], int, float, float]:
    """What the C++ needs of one engine's ``prefill_s``: a plain ``EnginePerf``'s tables
    (computed there), or only the engine (any other kind is asked, once per prompt length)."""
    if type(engine) is EnginePerf:
        return (
            engine,
            True,
            engine._lin,
            int(engine._lin_max_n),
            float(engine._lin_slope),
            float(engine.prefill_attn_s_per_token2),
        )
    return (engine, False, [], 0, 0.0, 0.0)


def _bind_costs(tables: ClusterTables, anywhere: AnyDeployment) -> TaskCosts:
    """The C++ estimates of ``tables`` and ``anywhere``: the same per-class and
    per-configuration numbers the Python estimates read (``model_classes``,
    ``AnyDeployment.configs``), copied once (they never change during a run)."""
    assert _EXTENSION is not None
    index: dict[int, int] = {}
    specs: list[tuple[object, bool, list[float], int, float, float]] = []

    def prefill_index(engine: object) -> int:
        if id(engine) not in index:
            index[id(engine)] = len(specs)
            specs.append(_prefill_spec(engine))
        return index[id(engine)]

    classes = [
        [(prefill_index(eng), count, lin1, attn) for _, eng, count, lin1, attn in per_model]
        for per_model in tables.model_classes
    ]
    configs = [
        [(prefill_index(c.engine), c.step_s, c.attn_s_per_token) for c in per_model]
        for per_model in anywhere.configs
    ]
    costs: TaskCosts = _EXTENSION.TaskCosts(  # type: ignore[attr-defined]
        specs,
        classes,
        configs,
        MODEL_INDEX,
        tables.max_core_speed,
        tables.mean_core_speed,
        anywhere.max_core_speed,
    )
    _COSTS[tables] = (anywhere, costs)
    return costs


def task_costs(tables: ClusterTables, anywhere: AnyDeployment | None = None) -> TaskCosts:
    """The compiled estimates of ``tables`` (bound on first use; ``anywhere``: the
    any-deployment configurations, by default the cluster's own)."""
    got = _COSTS.get(tables)
    if got is not None and (anywhere is None or got[0] is anywhere):
        return got[1]
    return _bind_costs(tables, anywhere if anywhere is not None else any_deployment(tables.spec))


def job_bounds_compiled(
    tables: ClusterTables, anywhere: AnyDeployment, job: Job
) -> tuple[float, float]:
    """``kernel.records.job_bounds`` on the compiled core: the same two doubles."""
    return task_costs(tables, anywhere).bounds(job.workflow)


def mean_task_costs_compiled(tables: ClusterTables, wf: WorkflowInstance) -> list[float]:
    """``kernel.ranks.mean_task_costs`` on the compiled core: the same list."""
    return task_costs(tables).mean_costs(wf)


# -- the compiled task requests ---------------------------------------------------------------

_REQUESTS: list[RequestBuilder] = []
"""The one request builder (it holds only ``TaskRequest``'s class and the model index)."""


def request_builder() -> RequestBuilder:
    if not _REQUESTS:
        assert _EXTENSION is not None
        fields = dataclasses.fields(TaskRequest)
        defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        _REQUESTS.append(
            _EXTENSION.RequestBuilder(  # type: ignore[attr-defined]
                TaskRequest, [f.name for f in fields], defaults, MODEL_INDEX
            )
        )
    return _REQUESTS[0]


def task_request_compiled(
    tasks: RunTasks, gid: int, servers: PerId[int], now: float, attained: np.ndarray
) -> TaskRequest:
    """``RunTasks.request`` on the compiled core: an equal ``TaskRequest`` whose fields are
    the same objects (``sim/_core/requests.hpp``)."""
    return request_builder().request(tasks, gid, servers, now, attained)
