"""Which core runs the simulator: the pure-Python engine (the default, and the executable
specification) or the compiled core (opt-in: ``SCALESCHED_CORE=compiled`` in the
environment, or ``Simulation(core="compiled")``).

The compiled core is C++ built by the package's own build (``CMakeLists.txt``,
``src/scalesched/sim/_core``, nanobind). It is being moved into C++ piece by piece (issue "A
compiled simulation core"); each piece must give the Python engine's traces bit for bit,
so switching the core on changes speed, never results. Compiled so far:

* the decision build: ``make_decision`` and ``transfer_times`` (``decision.features``),
  every per-server array of a ``Decision`` computed in one C++ loop instead of some forty
  numpy calls (``make_decision_compiled``).

Why opt-in: the pure-Python engine stays the reference the compiled pieces are tested
against (``tests/sim/test_compiled_core.py``), and an install without a C++ compiler has no
compiled core at all. Asking for it there runs the Python engine, with one warning.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from scalesched.cluster.tables import MODEL_NAMES, ClusterTables
from scalesched.decision.features import ClusterStateView, Decision, TaskRequest, make_decision

if TYPE_CHECKING:
    from scalesched.sim._simcore import DecisionCore

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
    ``python``. ``compiled`` without the compiled module falls back to ``python`` and warns
    (once per process: a run makes many simulations, forks and rollouts)."""
    global _warned
    name = core if core is not None else (os.environ.get(CORE_ENV) or "python")
    if name not in CORES:
        source = "core" if core is not None else CORE_ENV
        raise ValueError(f"{source}={name!r}: expected one of {', '.join(CORES)}")
    if name == "compiled" and _EXTENSION is None:
        if not _warned:
            _warned = True
            warnings.warn(
                "scalesched: the compiled simulation core is not built in this install (no "
                "C++ compiler at install time?); running the pure-Python engine",
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


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class CompiledDecision(Decision):
    """A ``Decision`` built by the compiled core: the same fields, bit for bit; its
    ``at_output_tokens`` (tail's quantile, hedging's spread) builds on the compiled core
    too."""

    def at_output_tokens(self, tokens: int) -> Decision:
        task = dataclasses.replace(self.task, output_tokens_est=tokens)
        again = make_decision_compiled(self._tables, self._view, task, transfer=self.transfer_s)
        again.mask = self.mask
        return again


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
    core = _BOUND.get(tables)
    if core is None:
        check_bindable(tables)
        core = _bind(tables)
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
