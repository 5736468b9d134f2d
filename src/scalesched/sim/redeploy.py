"""Re-deployment, a part of the simulation: a planned run moved to another deployment
mid-run (``Redeploy``), group by group as ``decision.redeploy.deployment_diff`` says, with
load times charged and GPUs held while loading; and the books of the GPUs the deployment
holds over time (``held_gpu_seconds``), for every planned run.

The new tables take effect at once for decisions: a group that leaves takes no new call, a
group that arrives takes calls that wait for its load. GPUs are the server's (a count, as
residency keeps them): a group that arrives, or grows, waits until the groups that leave
have drained and given theirs back; it never evicts a group of the deployment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalesched.cache.kv import PrefixCache
from scalesched.cluster.tables import MODEL_NAMES, ClusterTables
from scalesched.decision.features import ENGINE_ABSENT, ENGINE_LOADING
from scalesched.decision.redeploy import Redeploy, deployment_diff, group_key
from scalesched.decision.scheduler import SchedulingError
from scalesched.sim.events import DRAINED as _DRAINED
from scalesched.sim.events import GROWN as _GROWN
from scalesched.sim.gpu_engine import SimEngine as _Engine

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


class Redeployments:
    """Carries out ``Redeploy`` requests; keeps the held-GPU log and the ``redeploy_*``
    counts."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.requests = self.loads = self.unloads = self.resizes = 0
        self.log: list[tuple[float, float]] = []
        """(time, GPUs held by engines resident or loading from then on), one entry per
        change: the step function ``held_gpu_seconds`` integrates."""
        self.waiting: list[list[tuple[_Engine, int]]] = [[] for _ in range(sim.tables.n)]
        """Per server: engines waiting for GPUs, with the class they load or grow to
        under ``target`` (a new group: its own class; a resize: the larger group's)."""
        self.target: ClusterTables = sim.tables
        """The deployment the run is moving to (the latest ``Redeploy``)."""
        self.growing: dict[_Engine, int] = {}
        """Resizes under way: engine -> the mark its GROWN event carries."""

    # -- the held-GPU books ------------------------------------------------------------
    def note_held(self) -> None:
        """GPUs held changed now (or the run starts): one log entry."""
        sim = self.sim
        held = float(sim.tables.gpus.sum()) - float(sum(sim._free_gpus))
        if self.log and self.log[-1][0] == sim.now:
            self.log[-1] = (sim.now, held)
        else:
            self.log.append((sim.now, held))

    def held_gpu_seconds(self, start: float, end: float) -> float:
        """GPU-seconds held by the engines (resident, loading or draining) from ``start``
        to ``end``: GPUs x time, integrated over the held-GPU log."""
        total = 0.0
        for i, (t, held) in enumerate(self.log):
            nxt = self.log[i + 1][0] if i + 1 < len(self.log) else max(end, t)
            lo, hi = max(t, start), min(nxt, end)
            if hi > lo:
                total += held * (hi - lo)
        return total

    def metrics(self) -> dict[str, float | int]:
        """The ``redeploy_*`` figures of a run that re-deployed, and the GPU-seconds held
        over its measurement window (first to last measured arrival)."""
        sim = self.sim
        first, last = sim.window
        start = sim.arrival_time(first) if sim.n_jobs else 0.0
        end = sim.arrival_time(last) if sim.n_jobs else 0.0
        return {
            "redeploys": self.requests,
            "redeploy_loads": self.loads,
            "redeploy_unloads": self.unloads,
            "redeploy_resizes": self.resizes,
            "window_held_gpu_s": self.held_gpu_seconds(start, end),
        }

    # -- carrying a request out ------------------------------------------------------
    def apply(self, request: Redeploy) -> None:
        """Move the run to ``request.tables`` (module docstring)."""
        sim = self.sim
        old, new = sim.tables, request.tables
        if not old.pinned:
            raise SchedulingError("Redeploy needs a planned run (a deployment's tables)")
        if new.names != old.names:
            raise SchedulingError("Redeploy needs a deployment of the run's own cluster")
        self.requests += 1
        diff = deployment_diff(old, new)
        sim.tables, self.target = new, new
        index = MODEL_NAMES.index
        for s, model in diff.kept:
            self._retarget(sim._engines[s][index(model)], new)
        for s, model in diff.unloads:
            self._drain(sim._engines[s][index(model)])
        for s, model in diff.resizes:
            self._resize(sim._engines[s][index(model)], new)
        for s, model in diff.loads:
            back = sim._engines[s].get(index(model))
            if back is None:
                self._load(s, index(model), new)
            elif group_key(back.perf) == group_key(new.engines[new.engine_class[s, back.model]]):
                self._retarget(back, new)  # still draining: it stays, as it is
            else:
                self._resize(back, new)  # still draining: it stays, resized
        for s in range(new.n):
            self._serve(s)
        self.note_held()

    def _pending_load(self, eng: _Engine) -> bool:
        """Whether ``eng`` is a group that arrived and still waits for GPUs to load."""
        return any(e is eng and k < 0 for e, k in self.waiting[eng.server])

    def _cancel_growth(self, eng: _Engine) -> None:
        """A growth waiting for GPUs or under way is called off: a newer request decides."""
        sim, s = self.sim, eng.server
        if eng.grow_to >= 0:  # under way: its extra GPUs go back, its GROWN is stale
            sim._free_gpus[s] += eng.grow_extra
            sim.free_gpus[s] += eng.grow_extra
            eng.grow_to, eng.grow_extra = -1, 0.0
            eng.grow_mark += 1
        self.waiting[s] = [(e, k) for e, k in self.waiting[s] if not (e is eng and k >= 0)]

    def _retarget(self, eng: _Engine, new: ClusterTables) -> None:
        """A group kept alike: its class in the new tables (the same numbers); a growth
        toward it goes on."""
        s, k = eng.server, int(new.engine_class[eng.server, eng.model])
        eng.draining = False
        self.waiting[s] = [(e, k if e is eng and j >= 0 else j) for e, j in self.waiting[s]]
        if eng.grow_to >= 0:
            eng.grow_to = k
            return
        eng.klass = k
        eng.reload_step_tables(new)

    def _drain(self, eng: _Engine) -> None:
        """A group that leaves: no new call reaches it (the tables say so); it unloads once
        it holds no call (at once if it holds none)."""
        sim = self.sim
        s, m = eng.server, eng.model
        self._cancel_growth(eng)
        self.unloads += 1
        if self._pending_load(eng) and not eng.waiting and sim.engine_batch[s, m] == 0:
            self.waiting[s] = [w for w in self.waiting[s] if w[0] is not eng]
            del sim._engines[s][m]
            sim.engine_state[s, m] = ENGINE_ABSENT
            return
        eng.draining = True
        self.schedule_drain(eng)

    def _resize(self, eng: _Engine, new: ClusterTables) -> None:
        """A group that changes: a smaller one (or one still waiting for GPUs) at once; a
        larger or re-laid-out one after its new replicas load, on GPUs it holds meanwhile
        (a group still loading too: it never takes GPUs that are not free)."""
        s, m = eng.server, eng.model
        self._cancel_growth(eng)
        eng.draining = False
        k = int(new.engine_class[s, m])
        self.resizes += 1
        if float(new.tp[s, m]) < eng.tp or self._pending_load(eng):
            self._switch(eng, new, k)
        else:
            self.waiting[s].append((eng, k))

    def _load(self, s: int, m: int, new: ClusterTables) -> None:
        """A group that arrives: an engine that waits for GPUs, then loads."""
        sim = self.sim
        eng = _Engine(s, m, float(new.tp[s, m]), int(new.engine_class[s, m]), new)
        if sim._kv is not None:
            eng.kv = PrefixCache(sim._kv.eviction)
        sim._engines[s][m] = eng
        sim.engine_state[s, m] = ENGINE_LOADING
        sim.engine_ready_at[s, m] = sim.now + float(new.load_s[s, m])
        self.loads += 1
        self.waiting[s].append((eng, -1))

    def _serve(self, s: int) -> None:
        """Start every waiting load or growth whose GPUs are free now, in request order."""
        sim = self.sim
        still = []
        for eng, k in self.waiting[s]:
            need = eng.tp if k < 0 else float(self.target.tp[s, eng.model]) - eng.tp
            if sim._free_gpus[s] < need - 1e-9:
                still.append((eng, k))
                continue
            if k < 0:
                sim._residency.start_load(eng)
                continue
            sim._free_gpus[s] -= need  # held while the new replicas load
            sim.free_gpus[s] -= need
            eng.grow_to, eng.grow_extra = k, need
            eng.grow_mark += 1
            key = s * len(MODEL_NAMES) + eng.model
            sim._push(sim.now + float(self.target.load_s[s, eng.model]), _GROWN, key, eng.grow_mark)
        self.waiting[s] = still

    def on_grown(self, key: int, mark: int) -> None:
        """A larger group's new replicas are loaded: it serves at its new size."""
        sim = self.sim
        s, m = divmod(key, len(MODEL_NAMES))
        eng = sim._engines[s].get(m)
        if eng is None or eng.grow_to < 0 or eng.grow_mark != mark:
            return  # called off since
        sim._free_gpus[s] += eng.grow_extra  # the held GPUs move into the engine's books
        sim.free_gpus[s] += eng.grow_extra
        k, eng.grow_to, eng.grow_extra = eng.grow_to, -1, 0.0
        self._switch(eng, self.target, k)
        self.note_held()
        sim.release_deferred()

    def _switch(self, eng: _Engine, tables: ClusterTables, k: int) -> None:
        """The engine serves as class ``k`` of ``tables`` from now: its GPUs, batch cap, KV
        memory and step times; calls running keep their progress."""
        sim, s = self.sim, eng.server
        new_tp = float(tables.tp[s, eng.model])
        if not self._pending_load(eng):  # it holds its GPUs: the books follow
            delta = new_tp - eng.tp
            sim._free_gpus[s] -= delta
            sim.free_gpus[s] -= delta
            if eng.busy:
                sim._gpu_area[s] += sim._busy_gpus[s] * (sim.now - sim._gpu_mark[s])
                sim._gpu_mark[s] = sim.now
                sim._busy_gpus[s] += delta
            if eng.idle:
                sim.idle_gpus[s] += delta
        sim._llm.advance(eng)
        perf = tables.engines[k]
        eng.klass, eng.perf, eng.tp = k, perf, new_tp
        eng.max_batch, eng.kv_cap = perf.max_batch, perf.kv_capacity_tokens
        eng.reload_step_tables(tables)
        if eng.state != ENGINE_LOADING:
            sim._llm.reschedule(eng)
            sim._llm.admit(eng)

    # -- draining ----------------------------------------------------------------------
    def schedule_drain(self, eng: _Engine) -> None:
        """A draining group may be empty: look at it as the next event of this instant."""
        sim = self.sim
        sim._push(sim.now, _DRAINED, eng.server * len(MODEL_NAMES) + eng.model, 0)

    def on_drained(self, key: int, _: int) -> None:
        """Unload a draining group that holds no call and has none on its way."""
        sim = self.sim
        s, m = divmod(key, len(MODEL_NAMES))
        eng = sim._engines[s].get(m)
        if eng is None or not eng.draining or sim.engine_batch[s, m] > 0:
            return
        sim._llm.set_idle(eng)  # a pinned engine that never served is not booked idle yet
        if not eng.idle:
            return
        sim._residency.unload(eng)
        self._serve(s)
        self.note_held()
        sim.release_deferred()
