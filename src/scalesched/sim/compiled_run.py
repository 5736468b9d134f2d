"""Whole runs on the compiled core: the event loop, the execution model and the books in
C++ (``sim/_core/event_core.hpp``), with a built-in policy answering every decision there,
so that a run calls Python once per workflow instead of some forty times per task.

The run is the Python engine's, event for event: the C++ mirrors ``Simulation`` and its
parts handler for handler, draws the same sequence numbers in the same order and keeps
the same doubles, so traces and metrics are identical
(``tests/sim/test_compiled_run.py``). When it ends, what it kept is written back into the
``Simulation`` (counters, per-task and per-job books, the accounts' integrals and window
marks, the held-GPU log), so that ``sim.run.summarise`` and everything after it read the
run as if the Python loop had made it. The live per-server arrays the decisions read are
the simulation's own numpy arrays, written in place as the run goes.

What it covers (``unsupported`` names the first thing that stops it, and the run then
goes through the ordinary decision cycle, on the compiled decision build):

* a scheduler whose class declares ``compiled_policy`` next to its ``select``: ``eft``,
  ``tail`` (and ``pred_mean``; not its scale-out or adapted forms), ``least_loaded``,
  ``kv_aware``, ``p2c`` (numpy's PCG64 stream in C++), and the orders ``fcfs_workflow``
  and ``plas`` on ``tail``'s placement (``heft_online`` is ``eft`` in the ``rank`` ready
  order);
* a fresh simulation on the compiled core, up front or streamed, in either ready order
  (``rank``: HEFT's visible upward ranks in C++, ``sim/_core/ranks.hpp``, the same doubles
  as the Python book's ``kernel.ranks``);
* dynamic residency or a deployment's pinned engines, LLM and tool tasks, KV reuse
  (``--kv-policy``: ``sim/_core/prefix_cache.hpp``) and the tool cache;
* not: the logits cache, hedges, deferrals, replica loads and re-deployments (no built-in
  policy asks for them; ``compiled_loop`` carries out deferrals), forks and sampled
  futures.

rollout's trials (``compiled_trials``) use the same core the other way round: the
Python simulation's state at an open decision is taken over (``EventRun.adopt``) and
copied per candidate (``EventRun.fork``), each copy runs to the horizon under the base's
compiled twin, and nothing of the Python simulation changes. On sampled futures the state
taken over is one Python fork's per future (its redrawn tasks and arrivals).

Left as they were: the Python engine objects (``sim._engines``: a deployment's pinned
engines keep their state of time 0) and the routes (``RunLedger.routes``), which only
the decision cycle's policies read.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import gc
import itertools
import math
import weakref
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scalesched.cache.kv import (
    AGENT_HORIZON_S,
    BLOCK_TOKENS,
    KV_POLICIES,
    TTL_MARGIN,
    TTL_MAX_S,
    TTL_SLACK_S,
)
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES
from scalesched.kernel.records import check_feasible, task_record
from scalesched.sim import core
from scalesched.sim.replicas import HeldReplica
from scalesched.sim.tool_cache import LOOKUP_S

TTL_TERMS = (TTL_MARGIN, TTL_SLACK_S, TTL_MAX_S)

if TYPE_CHECKING:
    from scalesched.decision.scheduler import Scheduler
    from scalesched.sim.engine import Simulation
    from scalesched.workload.instance import Job

POLICIES = (
    "eft",
    "tail",
    "least_loaded",
    "fcfs_workflow",
    "plas",
    "kv_aware",
    "p2c",
    "soft_eft",
    "soft_tail",
)
"""The policies the compiled core answers itself, in the C++ ``Policy`` order (``p2c``,
``soft_eft`` and ``soft_tail`` draw from their scheduler's generator in C++: numpy's PCG64
stream, ``_core/numpy_random.hpp``; the soft ones' ``log1p`` and ``exp`` are numpy's ufuncs,
called from C++: ``_core/soft_eft.hpp``). ``tail`` ranks servers at the output length its
scheduler's ``workflow_lengths`` gives each LLM call: computed in C++ from the scheduler's
``token_head`` where it gives one (the same integers: ``sim/_core/token_head.hpp``), else
asked of Python once per workflow; ``fcfs_workflow`` and ``plas`` place as ``tail`` and
order each engine's queue (``Place.priority``)."""

RANKED_AT_TAIL = frozenset({"tail", "fcfs_workflow", "plas", "soft_tail"})
"""The policies that rank servers at tail's output lengths (asked once per workflow)."""


def compiled_policy(scheduler: Scheduler) -> str | None:
    """The built-in policy ``scheduler`` is, or None: the class that defines its ``select``
    must declare ``compiled_policy`` too (a subclass that changes ``select`` without
    declaring it again is a policy of its own); the scheduler's value of it (a property
    may say None for a configuration the core does not mirror) names the policy."""
    for cls in type(scheduler).__mro__:
        if "select" in vars(cls):
            if "compiled_policy" not in vars(cls):
                return None
            name = getattr(scheduler, "compiled_policy", None)
            return name if name in POLICIES else None
    return None


def unsupported(sim: Simulation, scheduler: Scheduler) -> str | None:
    """Why ``sim`` cannot run whole on the compiled core under ``scheduler`` (None: it can)."""
    if sim.events or sim.decisions or sim.now or sim.pending or sim._current is not None:
        return "the simulation is already under way"
    return _uncovered(sim, scheduler)


def _uncovered(sim: Simulation, scheduler: Scheduler) -> str | None:
    """What the C++ core does not mirror, in a simulation and a policy (``unsupported``,
    ``trials_unsupported``)."""
    if sim.core == "compiled" and compiled_policy(scheduler) is None:
        return f"policy {scheduler.name!r} has no compiled twin"
    return uncovered_state(sim)


def uncovered_state(sim: Simulation) -> str | None:
    """What the C++ core does not mirror in a simulation's set-up and state (also
    ``compiled_loop``'s rule)."""
    if sim.core != "compiled" or not hasattr(core._EXTENSION, "EventRun"):
        return "the simulation runs on the Python core"
    if sim._futures is not None and sim.stream is not None:
        return "a streamed fork on sampled futures (its jobs to come are not realised)"
    if sim._rides is not None:
        return "the logits cache"
    if sim._replicas.requests or sim._redeploy.requests or sim._copies or sim.hedged_tasks:
        return "replicas, re-deployments or hedges"
    if sim.deferred or sim.must_place or sim.deferrals:
        return "deferred tasks"
    for engines in sim._engines:
        for eng in engines.values():
            if eng.replica_at >= 0 or eng.draining or eng.grow_to >= 0:
                return "an engine with a replica or a re-deployment"
    return None


def run_compiled(sim: Simulation, scheduler: Scheduler) -> bool:
    """Run ``sim`` to its end on the compiled core with ``scheduler``'s built-in twin and
    write the run back into ``sim``; False (nothing run) where ``unsupported`` says why."""
    if unsupported(sim, scheduler) is not None:
        return False
    policy = compiled_policy(scheduler)
    run = _bind(sim)
    lengths = _output_lengths(run, scheduler) if policy in RANKED_AT_TAIL else None
    generator_in(run, scheduler)
    with gc_paused():
        run.run(POLICIES.index(policy), lengths)
        _write_back(sim, run)
    generator_out(run, scheduler)
    return True


SAMPLING = frozenset({"p2c", "soft_eft", "soft_tail"})
"""The compiled policies that draw from their scheduler's ``generator``."""


def generator_in(run: Any, scheduler: Scheduler) -> None:
    """A sampling policy's generator state into the run (its draws go on in C++), and
    soft_eft's weights: its ``sharpness`` and numpy's kernels with their scratch."""
    generator = getattr(scheduler, "generator", None)
    policy = compiled_policy(scheduler)
    if policy in ("soft_eft", "soft_tail"):
        n = run.n_servers()
        sharpness = float(scheduler.sharpness)  # type: ignore[attr-defined]
        run.use_soft_eft(sharpness, np.log1p, np.exp, np.zeros(n), np.zeros(n))
    if policy in SAMPLING and generator is not None:
        state = generator.bit_generator.state
        if state["bit_generator"] != "PCG64":
            raise ValueError(f"{scheduler.name}: the compiled core draws from PCG64 only")
        words = (state["state"]["state"], state["state"]["inc"])
        halves = [part for w in words for part in (w >> 64, w & _LOW64)]
        run.use_rng(*halves, bool(state["has_uint32"]), int(state["uinteger"]))


def generator_out(run: Any, scheduler: Scheduler) -> None:
    """The generator state the run left, back into the policy (as if it had drawn)."""
    generator = getattr(scheduler, "generator", None)
    if compiled_policy(scheduler) in SAMPLING and generator is not None:
        state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger = run.rng_state()
        generator.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": state_hi << 64 | state_lo, "inc": inc_hi << 64 | inc_lo},
            "has_uint32": int(has_uint32),
            "uinteger": uinteger,
        }


_LOW64 = (1 << 64) - 1


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off while a whole run goes on in C++: the run creates
    Python objects (trace rows, the write-back's lists) but no cycles, and each collection
    walks every workflow object of the run (8% of an eft run at N = 256, measured with
    perf). Left as it was found (off stays off)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


Trial = Callable[[int, float, "float | None"], tuple[float, float, int, float]]
"""``trial(server, end, priority)``: rollout's measure of one candidate (``compiled_trials``)."""


def trials_unsupported(sim: Simulation, base: Scheduler) -> str | None:
    """Why rollout's trials at ``sim``'s open decision cannot run in C++ under ``base``
    (None: they can)."""
    if sim._current is None or sim._current_decision is None:
        return "no open decision"
    return _uncovered(sim, base)


def adopted(sim: Simulation, base: Scheduler) -> Any:
    """The C++ run (``EventRun``) holding ``sim``'s state now, to go on under ``base``'s
    compiled twin: ``fork()`` copies it, ``trial(...)`` runs a copy of it (the caller has
    checked ``trials_unsupported``; nothing of ``sim`` changes). A fork on sampled futures
    gives its redrawn truths by id (``RedrawnTasks.truths``): drawn where a task had not
    started, each once whatever order it is read in (``sim.futures``)."""
    policy = compiled_policy(base)
    assert policy is not None
    run = _bind(sim, resident=False)
    lengths = _output_lengths(run, base) if policy in RANKED_AT_TAIL else None
    seq = next(copy.copy(sim._seq))  # the next number the run's counter gives
    redrawn = sim._futures.truths if sim._futures is not None else None  # sampled truths
    run.adopt(sim, seq, POLICIES.index(policy), lengths, redrawn)
    generator_in(run, base)  # each trial copies the run, the generator's state with it
    if sim._kv is not None:
        run.adopt_kv(*_kv_snapshot(sim))
    return run


def _kv_snapshot(sim: Simulation) -> tuple[list[Any], list[Any], list[Any], int]:
    """A ``--kv-policy`` run's KV state now, for ``EventRun.adopt_kv``: every engine's
    cache (segments in its dict's order with their parents as indices, its heap's entries
    with their segment's index or -1 where it is no longer cached, its next sequence number
    and counters), each admitted call's reservation and held segment, the agents'
    re-entries and the tokens lost with unloaded engines."""
    kv = sim._kv
    assert kv is not None
    index: dict[int, int] = {}  # id(segment) -> its index in its engine's cache
    caches = []
    for s, engines in enumerate(sim._engines):
        for m, eng in engines.items():
            cache = eng.kv
            if cache is None:
                continue
            order = list(cache.segments.values())
            local = {id(seg): i for i, seg in enumerate(order)}
            index.update(local)
            segments = [
                (seg.key, -1 if seg.parent is None else local[id(seg.parent)], seg.end, seg.tokens)
                + (seg.children, seg.refs, seg.last, seg.bonus, seg.prio, seg.expiry)
                for seg in order
            ]
            heap = [(prio, seq, local.get(id(seg), -1)) for prio, seq, seg in cache._heap]
            counters = (cache.resident, cache.held, cache.evicted)
            caches.append((s, m, segments, heap, next(copy.copy(cache._seq)), *counters))
    held = [
        (gid, private, -1 if seg is None else index[id(seg)])
        for gid, (private, seg) in kv.held.items()
    ]
    return caches, held, list(kv.reentries.items()), kv.lost


def compiled_trials(sim: Simulation, base: Scheduler) -> Trial | None:
    """rollout's trials at ``sim``'s open decision, in C++: the state is taken over once
    (``EventRun.adopt``, nothing of ``sim`` changed), and each trial copies it in C++,
    places the open task on the candidate and runs the cycle under ``base``'s compiled
    twin until a decision comes up at ``end`` or later: the same numbers as a Python fork
    driven by a copy of ``base`` (``RolloutScheduler.trial``). None where
    ``trials_unsupported`` says why."""
    if trials_unsupported(sim, base) is not None:
        return None
    run = adopted(sim, base)
    gid, decision, area0 = sim._current, sim._current_decision, sim.in_system_area
    assert gid is not None and decision is not None

    def trial(server: int, end: float, priority: float | None) -> tuple[float, float, int, float]:
        est = float(decision.exec_s[server])
        area, now, in_system, work = run.trial(
            gid, server, est, math.nan if priority is None else priority, end
        )
        return float(area - area0), float(now), int(in_system), float(np.sum(np.array(work)))

    return trial


def _output_lengths(run: Any, scheduler: Scheduler) -> Callable[[Job], list[int]]:
    """tail's output length for each task of a job (0 for a tool): its scheduler's
    ``workflow_lengths`` (``policies.tail``), computed in C++ where the scheduler gives its
    head (``token_head``): ``run`` then asks Python only for a workflow with a call too
    close to a rounding boundary to call (``sim/_core/token_head.hpp``)."""
    lengths = scheduler.workflow_lengths  # type: ignore[attr-defined]
    spec = getattr(scheduler, "token_head", None)
    spec = spec() if spec is not None else None
    if spec is not None:
        run.use_token_head(_token_head(spec))

    def of(job: Job) -> list[int]:
        return lengths(job.workflow)  # type: ignore[no-any-return]

    return of


@dataclass(frozen=True, eq=False)
class TokenHeadSpec:
    """What the compiled core needs to compute tail's output lengths itself
    (``OutputLengths.head_spec``): the tokens head's layers and input scalings, the
    quantile column read, and ``task_inputs``' one-hot tables (name -> index). One per
    ``OutputLengths``, so that its C++ head, and the head's memo, live as long as it."""

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    x_mean: np.ndarray
    x_std: np.ndarray
    level: int
    roles: dict[str, int]
    patterns: dict[str, int]


TOKEN_TOLERANCE = 1e-9
"""How close (relative) to a rounding boundary the C++ output length may come before
Python is asked instead: far above the few ulps the two computations differ by."""

_HEADS: weakref.WeakKeyDictionary[TokenHeadSpec, dict[float, Any]] = weakref.WeakKeyDictionary()
"""The C++ head of each spec, per tolerance: built once (a rollout takes a run over at
every decision, and the head remembers each workflow's lengths)."""


def _token_head(spec: TokenHeadSpec) -> Any:
    """The C++ ``TokenHead`` of a scheduler's ``token_head()`` spec."""
    heads = _HEADS.setdefault(spec, {})
    head = heads.get(TOKEN_TOLERANCE)
    if head is None:
        ext: Any = core._EXTENSION
        head = heads[TOKEN_TOLERANCE] = ext.TokenHead(
            list(spec.weights),
            list(spec.biases),
            spec.x_mean,
            spec.x_std,
            spec.level,
            dict(MODEL_INDEX),
            spec.roles,
            len(MODEL_NAMES),
            spec.patterns,
            TOKEN_TOLERANCE,
        )
    return head


def _bind(sim: Simulation, *, resident: bool = True, book: bool = False) -> Any:
    """The C++ run over ``sim``'s tables, books and jobs (``resident``: with the engines
    live now, a fresh run's pinned ones; False: none, for ``adopt`` to take over).

    ``book``: the run keeps ``sim``'s Python task book current as it goes (jobs entering
    and leaving it, finished flags), for what reads it during the run: a Python policy's
    task requests (``compiled_loop``). HEFT's ranks, for the ``rank`` ready order and a
    request's rank, are the core's own, the same doubles as the book's
    (``sim/_core/ranks.hpp``)."""
    run = _event_run(sim, resident, _admitted(sim) if book and sim.stream is not None else None)
    if sim._tool_cache is not None:
        run.use_tool_cache(LOOKUP_S)
    if sim._kv is not None:  # a fresh run: every cache starts empty
        kv = sim._kv
        eviction = KV_POLICIES.index(kv.eviction)
        speed = sim.tables.mean_core_speed
        run.use_kv(eviction, kv.reuse, AGENT_HORIZON_S, speed, *TTL_TERMS, BLOCK_TOKENS)
    if book:
        run.on_finished(_finished_flags(sim))
    t = sim.tables
    run.heft_ranks(t.latency_s, t.mean_nic_bytes_per_s, sim.ready_order == "rank")
    return run


def _event_run(sim: Simulation, resident: bool, job_source: Callable[[int], Job] | None) -> Any:
    t = sim.tables
    ext: Any = core._EXTENSION
    classes = [
        (core._prefill_spec(perf), int(perf.max_batch), int(perf.kv_capacity_tokens))
        for perf in t.engines
    ]
    live = [
        (s, m, float(eng.tp))
        for s, engines in enumerate(sim._engines)
        for m, eng in engines.items()
    ]
    return ext.EventRun(
        core.decision_core(t),
        core.task_costs(t, sim._anywhere),
        classes,
        np.ascontiguousarray(t.decode_lin, dtype=np.float64),
        np.ascontiguousarray(t.decode_attn, dtype=np.float64),
        [[k for k, _ in t._model_cols[m].classes] for m in range(len(MODEL_NAMES))],
        len(MODEL_NAMES),
        [float(x) for x in t.tp.ravel()],
        [int(x) for x in t.engine_class.ravel()],
        [float(x) for x in t.load_s.ravel()],
        live if resident else [],
        list(sim._cores),
        list(sim._speed),
        float(t.gpus.sum()),
        [
            sim.est_work,
            sim.n_assigned,
            sim.busy_cores,
            sim.cpu_backlog,
            sim.tools_in_flight,
            sim.free_gpus,
            sim.idle_gpus,
        ],
        sim.engine_state,
        [sim.engine_ready_at, sim.engine_batch, sim.engine_ctx],
        [sim.attained, sim.lower_bounds, sim.any_deployment_bounds],
        list(sim._free_gpus),
        sim.arrivals.tolist(),
        sim.window[0],
        sim.window[1],
        sim.stream is not None,
        sim.record_trace and resident,
        job_source or _job_source(sim),
        sim.on_workflow_done if resident else None,
        _trace_row(sim),
        builtins.sum,
        MODEL_INDEX,
    )


def _admitted(sim: Simulation) -> Callable[[int], Job]:
    """A streamed run's job ``ji`` at its arrival, realised and checked
    (``compiled_run._job_source``) and given its ids in the Python task book, which its
    requests read (``RunLedger._admit_job``: the tasks, their servers)."""
    realise, tasks, in_flight, servers = _job_source(sim), sim.tasks, sim._in_flight, sim.server
    assert isinstance(servers, dict)

    def admit(ji: int) -> Job:
        job = realise(ji)
        in_flight[ji] = job
        servers.update(dict.fromkeys(tasks.admit(ji, job), -1))
        return job

    return admit


def _finished_flags(sim: Simulation) -> Callable[[int, int, bool], None]:
    """What a task finished in C++ changes of the Python task book its requests read: the
    task's flag and its workflow's ranks; a streamed run's finished job leaves the book
    (``RunLedger._retire_job``). (A closure over the book, not the loop: the C++ run holds
    it, and a loop it held would be a cycle no collector sees.)"""
    tasks, in_flight, servers = sim.tasks, sim._in_flight, sim.server
    offset, done, ranks = tasks.offset, tasks.done, tasks.ranks
    streamed = sim.stream is not None

    def finished(ji: int, i: int, last: bool) -> None:
        done[offset[ji] + i] = True
        ranks.task_finished(ji, i)
        if last:
            ranks.workflow_finished(ji)
            if streamed:
                off, n = offset[ji], len(in_flight[ji].workflow.tasks)
                ids = range(off, off + n)
                tasks.retire(ids, n, ji)
                for x in ids:
                    del servers[x]
                del in_flight[ji]

    return finished


def _job_source(sim: Simulation) -> Callable[[int], Job]:
    """Job ``ji`` at its arrival: the list's, or realised from the stream (and checked, as
    ``RunLedger._admit_job`` does)."""
    stream = sim.stream
    if stream is None:
        return sim.jobs.__getitem__
    tables = sim.tables

    def realise(ji: int) -> Job:
        job = stream.job(ji)
        check_feasible(tables, [job])
        return job

    return realise


def _trace_row(sim: Simulation) -> Callable[..., None]:
    """The trace row of a finished task, as ``RunLedger.finish`` writes it."""
    put = sim._trace_sink or sim.trace.append

    def row(
        job: Job,
        i: int,
        server: int,
        ready: float,
        landed: float,
        start: float,
        end: float,
        loaded: float,
        skipped: float,
    ) -> None:
        times = (ready, landed, start, end)
        put(task_record(job, job.workflow.tasks[i], server, times, loaded, skipped))

    return row


def _write_back(sim: Simulation, run: Any) -> None:
    """What the C++ run kept, into ``sim``'s books (lists in place: the ledger's registry
    and the ranks hold them)."""
    counters = run.counters()
    sim.now = counters["now"]
    for name in (
        "events",
        "decisions",
        "model_loads",
        "bytes_moved",
        "tasks_completed",
        "workflows_completed",
        "decode_retimes",
        "decode_skipped",
        "deferrals",
        "in_system",
        "in_system_area",
    ):
        setattr(sim, name, counters[name])
    sim._seq = itertools.count(counters["seq"])
    if sim._tool_cache is not None:
        sim._tool_cache.extend(*run.tool_cache_hits())
    if sim._kv is not None:
        sim._kv.absorb(*run.kv_records())
    requests, loads, released, calls, gpu_s, live, marks = run.replica_books()
    if requests:  # a policy answering in Python asked for replicas (compiled_loop)
        books = sim._replicas
        books.requests, books.loads, books.released, books.calls = requests, loads, released, calls
        books.gpu_s, books.marks = gpu_s, itertools.count(marks)
        books.live = {HeldReplica(tp, at): None for tp, at in live}
    busy_cores, free, busy_gpus, gpu_area, cpu_area, gpu_mark, cpu_mark = run.server_books()
    sim._busy_cores[:] = busy_cores
    sim._free_gpus[:] = free
    sim._busy_gpus[:] = busy_gpus
    sim._gpu_area[:] = gpu_area
    sim._cpu_area[:] = cpu_area
    sim._gpu_mark[:] = gpu_mark
    sim._cpu_mark[:] = cpu_mark
    marks, in_system = run.window_marks()
    sim.accounts.marks = [
        (np.array(g), np.array(c), area) for (g, c), area in zip(marks, in_system, strict=True)
    ]
    log = sim._redeploy.log
    for when, held in run.held_log():  # note_held's rule: one entry per instant
        if log and log[-1][0] == when:
            log[-1] = (when, held)
        else:
            log.append((when, held))
    if sim.stream is not None:  # a long run: straight into arrays (sim.job_end is one)
        run.job_end_into(sim.job_end)
        delays = array("d", [0.0]) * run.n_queue_delays()
        if delays:
            run.queue_delays_into(np.frombuffer(delays, dtype=np.float64))
        sim._queue_delays = delays
        sim.n_tasks = sim.tasks.n_tasks = counters["n_tasks"]
        return
    sim.job_end[:] = run.job_end()
    sim.job_left[:] = run.job_left()  # type: ignore[index]
    _per_id_back(sim, run)


def _per_id_back(sim: Simulation, run: Any) -> None:
    """A run kept up front: every per-id list, in place."""
    ints = (("server", 0), ("missing", 7))
    floats = (
        ("ready_at", 1),
        ("landed_at", 2),
        ("started_at", 3),
        ("ended_at", 4),
        ("loaded_at", 5),
        ("_est", 6),
        ("priority", 9),
    ) + ((("skipped_s", 10),) if sim.skipped_s is not None else ())
    for name, field in ints:
        getattr(sim, name)[:] = run.per_id_int(field)
    for name, field in floats:
        getattr(sim, name)[:] = run.per_id(field)
    done = sim.tasks.done
    assert isinstance(done, list)  # up front
    done[:] = run.per_id_done()
