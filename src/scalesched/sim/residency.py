"""Model residency, a part of the simulation: which engines hold GPUs on each server.
A model that is not resident is loaded (weights / load bandwidth) after evicting
least-recently-used idle engines; without enough GPUs the engine waits in the server's
GPU queue; a deployment pins every engine from time 0; an idle engine leaves with its
caches."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from scalesched.cache.kv import PrefixCache
from scalesched.decision.features import ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY
from scalesched.kernel.llm_engine import lru_evictions
from scalesched.sim.events import LOAD_DONE as _LOAD_DONE
from scalesched.sim.gpu_engine import SimEngine as _Engine

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


class Residency:
    """Loads, evictions and GPU queues of the simulation's engines."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        sim.loaded_at = sim.per_id(math.nan)
        """Per id: when the engine a call waited for became ready (the trace's ``loaded``)."""

    def request_gpus(self, eng: _Engine) -> None:
        sim = self.sim
        s = eng.server
        if sim._free_gpus[s] < eng.tp:
            self.evict_for(s, eng.tp)
        if sim._free_gpus[s] >= eng.tp:
            self.start_load(eng)
        else:
            sim._gpu_wait[s].append(eng)
            guess = sim.est_work[s] / max(1.0, sim.n_assigned[s])
            sim.engine_ready_at[s, eng.model] = sim.now + sim.tables.load_s[s, eng.model] + guess

    def pin_engines(self) -> None:
        """A deployment: every engine the tables allow is resident from time 0 and never
        unloads (no other engine can be created, so nothing ever evicts it)."""
        sim = self.sim
        t = sim.tables
        for s, m in zip(*np.nonzero(t.feasible), strict=True):
            eng = _Engine(int(s), int(m), float(t.tp[s, m]), int(t.engine_class[s, m]), t)
            if sim._kv is not None:
                eng.kv = PrefixCache(sim._kv.eviction)
            eng.state = ENGINE_READY
            sim._engines[int(s)][int(m)] = eng
            sim.engine_state[s, m] = ENGINE_READY
            sim._free_gpus[s] -= eng.tp
            sim.free_gpus[s] -= eng.tp

    def evict_for(self, s: int, need: float) -> None:
        sim = self.sim
        idle = [e for e in sim._engines[s].values() if e.idle]
        for e in lru_evictions(sim._free_gpus[s], need, idle) or ():
            self.unload(e)

    def unload(self, e: _Engine) -> None:
        """Idle engine ``e`` leaves its server (evicted, or a replica released): its GPUs
        are free and its caches go with it."""
        sim = self.sim
        s = e.server
        if e.kv is not None and sim._kv is not None:
            sim._kv.lost += e.kv.resident
        e.idle = False
        sim.idle_gpus[s] -= e.tp
        if e.replica_at >= 0:
            sim._replicas.gone(e)
        del sim._engines[s][e.model]
        sim._free_gpus[s] += e.tp
        sim.free_gpus[s] += e.tp
        sim.engine_state[s, e.model] = ENGINE_ABSENT
        sim._redeploy.note_held()

    def start_load(self, eng: _Engine) -> None:
        sim = self.sim
        s, m = eng.server, eng.model
        sim._free_gpus[s] -= eng.tp
        sim.free_gpus[s] -= eng.tp
        eng.state = ENGINE_LOADING
        sim.model_loads += 1
        ready_at = sim.now + float(sim.tables.load_s[s, m])
        sim.engine_ready_at[s, m] = ready_at
        sim._llm.refresh_busy(eng)
        sim._push(ready_at, _LOAD_DONE, s, m)
        sim._redeploy.note_held()

    def on_load_done(self, s: int, m: int) -> None:
        sim = self.sim
        eng = sim._engines[s][m]
        eng.state = ENGINE_READY
        eng.last_update = sim.now
        sim.engine_state[s, m] = ENGINE_READY
        loaded_at = sim.loaded_at
        assert loaded_at is not None  # the simulation keeps it
        for gid in eng.waiting:  # these calls waited for the load (the trace's ``loaded``)
            loaded_at[gid] = sim.now
        sim._llm.admit(eng)
        sim._llm.refresh_busy(eng)
        sim._llm.set_idle(eng)
        if eng.idle and sim._gpu_wait[s]:
            # nobody uses it yet (a replica, or every copy it loaded for was cancelled):
            # evictable for the engines waiting for this server's GPUs
            self.serve_gpu_wait(s)
        sim.release_deferred()

    def serve_gpu_wait(self, s: int) -> None:
        sim = self.sim
        wait = sim._gpu_wait[s]
        while wait:
            eng = wait[0]
            if sim._free_gpus[s] < eng.tp:
                self.evict_for(s, eng.tp)
            if sim._free_gpus[s] < eng.tp:
                return
            wait.popleft()
            self.start_load(eng)
