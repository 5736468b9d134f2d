"""Scale-out, a part of the simulation: replicas loaded ahead of demand (``LoadReplica``),
their idle-release timers, and the books behind the ``replica_*`` metrics."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from typing import TYPE_CHECKING

from scalesched.cache.kv import PrefixCache
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES
from scalesched.decision.actions import Action, LoadReplica
from scalesched.decision.features import ENGINE_LOADING
from scalesched.decision.redeploy import Redeploy
from scalesched.decision.scheduler import SchedulingError
from scalesched.sim.events import DRAINED as _DRAINED
from scalesched.sim.events import GROWN as _GROWN
from scalesched.sim.events import LOAD_DONE as _LOAD_DONE
from scalesched.sim.events import RELEASE as _RELEASE
from scalesched.sim.gpu_engine import SimEngine as _Engine

if TYPE_CHECKING:
    from scalesched.cluster.tables import ClusterTables
    from scalesched.sim.engine import Simulation


@dataclasses.dataclass(eq=False)
class HeldReplica:
    """A replica still resident or loading when a run on the compiled core ended: what
    ``Replicas.record`` reads of it (its GPUs and load start)."""

    tp: float
    replica_at: float


def check_loads(loads: list[LoadReplica], tables: ClusterTables) -> None:
    """Every replica request names a model that fits its server, or a ``SchedulingError``
    (checked before the answer carrying them is carried out)."""
    for load in loads:
        m = MODEL_INDEX.get(load.model)
        if m is None or not (0 <= load.server < tables.n) or not tables.feasible[load.server, m]:
            raise SchedulingError(
                f"cannot load a replica of {load.model!r} on server {load.server} "
                "(unknown model, server out of range, or the model does not fit there)"
            )


class Replicas:
    """What a run's ``LoadReplica`` requests did (the ``replica_*`` metrics), and the
    steps that carry them out."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.requests = self.loads = self.released = self.calls = 0
        self.gpu_s = 0.0
        """GPU-seconds held by replicas already unloaded (load start to unload)."""
        self.live: dict[_Engine | HeldReplica, None] = {}
        """Replicas resident or loading, in load order (a dict: a set's order would
        change the last bits of the GPU-seconds from process to process)."""
        self.marks = itertools.count()

    def record(self, now: float) -> tuple[int, int, int, int, float]:
        """(requests, loads, releases, calls that landed on a replica, GPU-seconds held
        from load start to unload or ``now``)."""
        live = sum(e.tp * (now - e.replica_at) for e in self.live)
        return self.requests, self.loads, self.released, self.calls, self.gpu_s + live

    def apply_with_loads(self, answer: Action) -> None:
        """Carry out the answer without its loads, then the loads: a replica request sees
        the state the placement left (its engine, if the task landed at once)."""
        sim = self.sim
        loads = [r for r in answer.loads if isinstance(r, LoadReplica)]
        redeploys = [r for r in answer.loads if isinstance(r, Redeploy)]
        check_loads(loads, sim.tables)
        sim.apply(dataclasses.replace(answer, loads=()))
        for load in loads:
            self.load_replica(load)
        for redeploy in redeploys:
            sim._redeploy.apply(redeploy)

    def load_replica(self, load: LoadReplica) -> None:
        """Start loading a replica on free GPUs; nothing when the model is resident or
        loading there, or the free GPUs do not hold it (a replica never evicts)."""
        sim = self.sim
        s, m = load.server, MODEL_INDEX[load.model]
        t, books = sim.tables, self
        books.requests += 1
        if m in sim._engines[s] or sim._free_gpus[s] < t.tp[s, m]:
            return
        eng = _Engine(s, m, int(t.tp[s, m]), int(t.engine_class[s, m]), t)
        if sim._kv is not None:
            eng.kv = PrefixCache(sim._kv.eviction)
        eng.replica_at, eng.idle_s, eng.last_used = sim.now, load.idle_s, sim.now
        sim._engines[s][m] = eng
        sim.engine_state[s, m] = ENGINE_LOADING
        books.loads += 1
        books.live[eng] = None
        sim._residency.start_load(eng)

    def arm_release(self, eng: _Engine) -> None:
        """A replica fell idle: unload it at ``idle_s`` from now unless used again."""
        sim = self.sim
        if math.isinf(eng.idle_s) or sim.done:
            return
        eng.idle_mark = mark = next(self.marks)
        key = eng.server * len(MODEL_NAMES) + eng.model
        sim._push(sim.now + eng.idle_s, _RELEASE, key, mark)

    def on_release(self, key: int, mark: int) -> None:
        sim = self.sim
        s, m = divmod(key, len(MODEL_NAMES))
        eng = sim._engines[s].get(m)
        if eng is None or eng.idle_mark != mark or not eng.idle:
            return  # evicted, or used since the timer was armed
        sim._residency.unload(eng)
        self.released += 1
        if sim._gpu_wait[s]:
            sim._residency.serve_gpu_wait(s)
        sim.release_deferred()

    def gone(self, eng: _Engine) -> None:
        """A replica is unloaded (released, or evicted for another model): book its GPUs."""
        sim = self.sim
        self.gpu_s += eng.tp * (sim.now - eng.replica_at)
        self.live.pop(eng, None)
        eng.replica_at = -1.0

    def drop_events(self) -> None:
        """Every workflow is done: release timers and replicas still loading (the only
        loads nothing waits for) must not run the clock on."""
        sim = self.sim
        heap = sim._heap  # in place: ``next_decision`` holds it
        gone = (_RELEASE, _LOAD_DONE, _DRAINED, _GROWN)
        heap[:] = [e for e in heap if e[2] not in gone]
        heapq.heapify(heap)
