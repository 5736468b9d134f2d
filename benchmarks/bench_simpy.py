"""The SimPy anchor: the simulator's execution model written the SimPy way, run on the same
workload and placements as the hand-written engine, side by side in one process.

    taskset -c 0 nice -n 5 python benchmarks/bench_simpy.py --cluster hetero-48 --workflows 1000

Why: the engine's docstring says SimPy would be slower; this measures by how much.

Fairness. Both sides run the same jobs (same seed) with the same placements: the engine runs
eft (recording every task's server); the SimPy model replays those servers, so it pays no
decision cost, and the engine's time is given with and without its decisions (the engine
builds each decision's features before asking the policy; "engine only" subtracts that and
the choice, as benchmarks/bench_sim.py does). The SimPy model keeps the engine's semantics:

* arrivals; a task is ready when its parents have finished, then its inputs travel from each
  parent's server (latency + bytes / min(NIC bandwidth), nothing on the same server) and it
  lands when the last input has arrived;
* tools take one core of their server (a FIFO ``simpy.Resource``) for
  ``cpu_work / core_speed`` seconds, then wait ``ext_latency`` holding no core;
* LLM tasks join the engine of their model on their server: created on first use, loaded
  (``load_s``) on ``tp`` GPUs after evicting least-recently-used idle engines, or waiting for
  GPUs; continuous batching with the batch cap and KV reservation (prompt + output tokens)
  at admission, prefill for ``prefill_s(prompt)``, then fluid decode on a virtual token
  clock whose step is ``decode_lin[batch] + decode_attn * context`` (one engine process,
  woken by a timeout for the next finishing request or by an event when the batch changes).

Two SimPy variants run: "execution only" keeps just what execution needs (readiness is
SimPy's: each task's process waits on its parents' events); "+ books" also keeps the books the
engine keeps for decisions and metrics, through the same ``RunLedger`` (readiness, ranks and
lower bounds at arrival, the per-server view, timestamps, the ``TaskRequest`` built before
each placement). The second is the like-for-like one. Neither keeps the engine's utilisation
integrals, in-system area or measurement-window marks (a few float updates per event).

Where it differs: events at the same instant may run in another order (SimPy's FIFO of
triggered events against the engine's sequence numbers; the engine places a task only after
every event of the instant has run), which can reorder a core queue or an admission at a
tie; hedging, deferral and deployments (pinned engines) are left out (eft uses none). The
run prints how far the per-workflow response times of the two are apart.
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import time
from collections import deque
from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

os.environ.setdefault("SCALESCHED_CORE", "python")  # the anchor is the Python engine's

from scalesched.cluster import get_cluster  # noqa: E402
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.cycle import Watched, drive
from scalesched.kernel.ledger import RunLedger
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim import engine as engine_module
from scalesched.sim.engine import Simulation
from scalesched.workload.instance import Job, TaskInstance

_TOKEN_EPS = 1e-6


class LlmEngine:
    """One model on ``tp`` GPUs of a server; its decode loop is a SimPy process."""

    def __init__(self, model: SimpyModel, server: int, m: int) -> None:
        t = model.tables
        self.model, self.server, self.m = model, server, m
        self.tp = float(t.tp[server, m])
        self.klass = int(t.engine_class[server, m])
        self.perf = t.engines[self.klass]
        self.ready = False
        self.waiting: deque[tuple[TaskInstance, simpy.Event]] = deque()
        self.n_active = 0
        self.kv_used = 0
        self.marks: list[tuple[float, int, TaskInstance, simpy.Event]] = []
        self.ctx_sum = 0
        self.vclock = 0.0
        self.last_update = 0.0
        self.step = 0.0
        self.last_used = 0.0
        self.changed = model.env.event()
        self.seq = 0

    @property
    def idle(self) -> bool:
        return self.ready and self.n_active == 0 and not self.waiting

    def submit(self, task: TaskInstance, done: simpy.Event) -> None:
        self.waiting.append((task, done))
        self.last_used = self.model.env.now
        if self.ready:
            self.admit()

    def admit(self) -> None:
        env = self.model.env
        while self.waiting and self.n_active < self.perf.max_batch:
            task, done = self.waiting[0]
            need = task.prompt_tokens + task.output_tokens
            if self.kv_used + need > self.perf.kv_capacity_tokens and self.n_active > 0:
                break
            self.waiting.popleft()
            self.kv_used += need
            self.n_active += 1
            env.process(self.prefill(task, done))

    def prefill(self, task: TaskInstance, done: simpy.Event) -> Generator[Any, Any, None]:
        yield self.model.env.timeout(self.perf.prefill_s(task.prompt_tokens))
        self.advance()
        self.seq += 1
        heapq.heappush(self.marks, (self.vclock + max(1, task.output_tokens), self.seq, task, done))
        self.ctx_sum += task.prompt_tokens + task.output_tokens // 2
        self.wake()

    def advance(self) -> None:
        now = self.model.env.now
        if self.marks:
            self.vclock += (now - self.last_update) / self.step
        self.last_update = now
        self.reprice()

    def reprice(self) -> None:
        if self.marks:
            t = self.model.tables
            b = min(len(self.marks), len(t.decode_lin[0]) - 1)
            self.step = float(
                t.decode_lin[self.klass, b] + t.decode_attn[self.klass] * self.ctx_sum
            )

    def wake(self) -> None:
        """The batch changed: the decode process re-times its next completion."""
        self.reprice()
        if not self.changed.triggered:
            self.changed.succeed()

    def decode(self) -> Generator[Any, Any, None]:
        """Finish requests as the token clock passes their marks."""
        env = self.model.env
        while True:
            if not self.marks:
                yield self.changed
                self.changed = env.event()
                continue
            left = max(0.0, self.marks[0][0] - self.vclock)
            due = env.timeout(left * self.step)  # SimPy cannot cancel it: stale ones fire idle
            yield due | self.changed
            if self.changed.processed:
                self.changed = env.event()
            self.advance()
            if not due.processed:
                continue  # woken by a batch change: re-time
            self.vclock = max(self.vclock, self.marks[0][0])
            finished = []
            while self.marks and self.marks[0][0] <= self.vclock + _TOKEN_EPS:
                _, _, task, done = heapq.heappop(self.marks)
                self.ctx_sum -= task.prompt_tokens + task.output_tokens // 2
                self.kv_used -= task.prompt_tokens + task.output_tokens
                self.n_active -= 1
                finished.append(done)
            self.last_used = env.now
            self.admit()
            self.reprice()
            for done in finished:
                done.succeed()
            if self.idle:
                self.model.serve_gpu_wait(self.server)


class SimpyModel:
    """The engine's execution model on SimPy, placements given (``placement[(wf, task)]``).

    Without ``books`` it keeps only what execution needs, and readiness is SimPy's (each
    task's process waits for its parents' events). With ``books`` it also keeps the books the
    engine keeps for decisions and metrics, through the same ``RunLedger``: readiness,
    arrival ranks and lower bounds, the per-server view (assigned work, cores, engine batch
    and context, tools in flight), timestamps, and the ``TaskRequest`` the engine builds for
    each placement before it asks the policy."""

    def __init__(
        self,
        tables: ClusterTables,
        jobs: list[Job],
        placement: dict[tuple[int, str], int],
        books: bool = False,
    ) -> None:
        self.env = simpy.Environment()
        self.tables, self.placement = tables, placement
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.workflow_id))  # as the ledger
        self.ledger = RunLedger(tables, self.jobs) if books else None
        t = tables
        self.cores = [simpy.Resource(self.env, capacity=int(c)) for c in t.cores]
        self.free_gpus = [float(g) for g in t.gpus]
        self.engines: list[dict[int, LlmEngine]] = [{} for _ in range(t.n)]
        self.gpu_wait: list[deque[LlmEngine]] = [deque() for _ in range(t.n)]
        self.response = np.full(len(jobs), np.nan)
        for ji, job in enumerate(self.jobs):
            self.env.process(self.arrival(ji, job) if books else self.workflow(ji, job))

    # -- with books: readiness and bookkeeping through the ledger, as the engine ------------
    def arrival(self, ji: int, job: Job) -> Generator[Any, Any, None]:
        yield self.env.timeout(job.arrival)
        assert self.ledger is not None
        self.ledger.arrive(ji, self.env.now)
        self.place_ready()

    def place_ready(self) -> None:
        """Place every ready task (the replayed placement) and start its process."""
        ledger, now = self.ledger, self.env.now
        assert ledger is not None
        while ledger.pending:
            gid = ledger.pending.popleft()
            ledger.request(gid, now)  # what the engine builds before each decision
            ji = ledger.tasks.job_of[gid]
            task = ledger.tasks.task(gid)
            server = self.placement[(self.jobs[ji].workflow_id, task.id)]
            ledger.decisions += 1
            ledger.book(gid, server, 0.0)
            self.env.process(self.booked_task(gid, ji, server, task))

    def booked_task(self, gid: int, ji: int, s: int, task: TaskInstance) -> Any:
        env, t, ledger = self.env, self.tables, self.ledger
        assert ledger is not None
        wf = self.jobs[ji].workflow
        off = ledger.tasks.offset[ji]
        i = gid - off
        delay = 0.0
        for p in wf.parents[i]:
            src = ledger.server[off + p]
            nbytes = wf.edge_bytes.get((p, i), 0.0)
            if src != s and nbytes > 0:
                ledger.bytes_moved += nbytes
                bw = min(t.nic_bytes_per_s[src], t.nic_bytes_per_s[s])
                delay = max(delay, t.latency_s + nbytes / bw)
        if delay > 0:
            yield env.timeout(delay)
        ledger.landed_at[gid] = env.now
        if task.kind == "llm":
            m = MODEL_INDEX[task.model or ""]
            finished = env.event()
            self.llm_engine(s, m).submit(task, finished)
            yield finished
            ledger.engine_batch[s, m] -= 1
            ledger.engine_ctx[s, m] -= task.prompt_tokens + task.output_tokens_est // 2
        else:
            if task.cpu_work > 0:
                with self.cores[s].request() as core:
                    yield core
                    ledger.started_at[gid] = env.now
                    ledger.busy_cores[s] += 1
                    yield env.timeout(task.cpu_work / t.core_speed[s])
                    ledger.busy_cores[s] -= 1
                    backlog = ledger.cpu_backlog[s] - task.cpu_work / t.core_speed[s]
                    ledger.cpu_backlog[s] = max(0.0, backlog)
            ledger.tools_in_flight[s] -= 1
            if task.ext_latency > 0:
                yield env.timeout(task.ext_latency)
        ledger.finish(gid, env.now)
        ledger.unassign(s, 0.0)
        if ledger.release_children(gid, env.now):
            self.response[ji] = env.now - self.jobs[ji].arrival
        self.place_ready()

    # -- without books: SimPy's own readiness ------------------------------------------------
    def workflow(self, ji: int, job: Job) -> Generator[Any, Any, None]:
        env = self.env
        yield env.timeout(job.arrival)
        wf = job.workflow
        done = [env.event() for _ in wf.tasks]
        servers = [self.placement[(job.workflow_id, task.id)] for task in wf.tasks]
        for i in range(len(wf.tasks)):
            env.process(self.task(wf, i, servers, done))
        yield env.all_of(done)
        self.response[ji] = env.now - job.arrival

    def task(self, wf: Any, i: int, servers: list[int], done: list[simpy.Event]) -> Any:
        env, t = self.env, self.tables
        if wf.parents[i]:
            yield env.all_of([done[p] for p in wf.parents[i]])
        s = servers[i]
        delay = 0.0
        for p in wf.parents[i]:
            nbytes = wf.edge_bytes.get((p, i), 0.0)
            if servers[p] != s and nbytes > 0:
                bw = min(t.nic_bytes_per_s[servers[p]], t.nic_bytes_per_s[s])
                delay = max(delay, t.latency_s + nbytes / bw)
        if delay > 0:
            yield env.timeout(delay)
        task = wf.tasks[i]
        if task.kind == "llm":
            finished = env.event()
            self.llm_engine(s, MODEL_INDEX[task.model or ""]).submit(task, finished)
            yield finished
        else:
            if task.cpu_work > 0:
                with self.cores[s].request() as core:
                    yield core
                    yield env.timeout(task.cpu_work / t.core_speed[s])
            if task.ext_latency > 0:
                yield env.timeout(task.ext_latency)
        done[i].succeed()

    def llm_engine(self, s: int, m: int) -> LlmEngine:
        eng = self.engines[s].get(m)
        if eng is None:
            eng = self.engines[s][m] = LlmEngine(self, s, m)
            self.env.process(eng.decode())
            if self.free_gpus[s] < eng.tp:
                self.evict_for(s, eng.tp)
            if self.free_gpus[s] >= eng.tp:
                self.env.process(self.load(eng))
            else:
                self.gpu_wait[s].append(eng)
        return eng

    def evict_for(self, s: int, need: float) -> None:
        idle = sorted((e for e in self.engines[s].values() if e.idle), key=lambda e: e.last_used)
        if self.free_gpus[s] + sum(e.tp for e in idle) < need:
            return
        for e in idle:
            if self.free_gpus[s] >= need:
                break
            del self.engines[s][e.m]
            e.ready = False  # its decode process stays parked on an event that never fires
            self.free_gpus[s] += e.tp

    def load(self, eng: LlmEngine) -> Generator[Any, Any, None]:
        self.free_gpus[eng.server] -= eng.tp
        yield self.env.timeout(float(self.tables.load_s[eng.server, eng.m]))
        eng.ready = True
        eng.last_update = self.env.now
        eng.admit()

    def serve_gpu_wait(self, s: int) -> None:
        wait = self.gpu_wait[s]
        while wait:
            eng = wait[0]
            if self.free_gpus[s] < eng.tp:
                self.evict_for(s, eng.tp)
            if self.free_gpus[s] < eng.tp:
                return
            wait.popleft()
            self.env.process(self.load(eng))

    def run(self) -> int:
        """Run to the end; returns the number of SimPy events processed."""
        env, events = self.env, 0
        step = env.step
        try:
            while True:
                step()
                events += 1
        except simpy.core.EmptySchedule:
            return events


def engine_run(
    spec: Any, tables: ClusterTables, jobs: list[Job], trace: bool = False
) -> dict[str, Any]:
    """eft on the hand-written engine: wall time, the part spent deciding, the placements
    (with ``trace``)."""
    policy = get_policy("eft")
    policy.reset(0)
    sim = Simulation(spec, jobs, tables=tables, record_trace=trace)
    decide = [0.0]
    real_make = engine_module.make_decision

    def timed_make(*args: Any) -> Any:
        t0 = time.perf_counter()
        out = real_make(*args)
        decide[0] += time.perf_counter() - t0
        return out

    engine_module.make_decision = timed_make  # type: ignore[assignment]
    start = time.perf_counter()
    timed = Watched(policy)
    try:
        drive(sim, timed)
    finally:
        engine_module.make_decision = real_make
    decide[0] += timed.select_s
    wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "decide_s": decide[0],
        "events": sim.events,
        "decisions": sim.decisions,
        "response": np.asarray(sim.response_times, dtype=float),
        "placement": {(r.workflow, r.task): r.server for r in sim.trace},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", default="hetero-48")
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--load", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each")
    args = parser.parse_args()
    spec = get_cluster(args.cluster)
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=args.workflows, load=args.load, seed=args.seed))
    traced = engine_run(spec, tables, jobs, trace=True)  # the placements to replay
    engine_walls, engine_only = [], []
    simpy_walls: dict[bool, list[float]] = {False: [], True: []}
    simpy_events: dict[bool, int] = {}
    responses: dict[bool, np.ndarray] = {}
    for _ in range(args.repeats):
        ours = engine_run(spec, tables, jobs)
        engine_walls.append(ours["wall_s"])
        engine_only.append(ours["wall_s"] - ours["decide_s"])
        for books in (False, True):
            model = SimpyModel(tables, jobs, traced["placement"], books=books)
            t0 = time.perf_counter()
            simpy_events[books] = model.run()
            simpy_walls[books].append(time.perf_counter() - t0)
            responses[books] = model.response
    per_k = 1000 / args.workflows
    e_all, e_only = min(engine_walls), min(engine_only)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, SimPy {simpy.__version__}; {args.cluster}, "
        f"{args.workflows} workflows (agentic-mix, load {args.load}, seed {args.seed}), "
        f"best of {args.repeats} alternating runs"
    )
    print(
        "\n| model | events | wall s per 1000 workflows | events/s | engine events/s "
        "| time vs engine only |"
    )
    print("|---|---|---|---|---|---|")
    rows = (
        ("engine + eft decisions", ours["events"], e_all),
        ("engine only (decisions subtracted)", ours["events"], e_only),
        ("SimPy, execution only", simpy_events[False], min(simpy_walls[False])),
        ("SimPy + the engine's books (RunLedger)", simpy_events[True], min(simpy_walls[True])),
    )
    for name, events, wall in rows:
        print(
            f"| {name} | {events:,} | {wall * per_k:.2f} | {events / wall:,.0f} "
            f"| {ours['events'] / wall:,.0f} | {wall / e_only:.2f}x |"
        )
    for books, response in responses.items():
        rel = np.abs(response - ours["response"]) / ours["response"]
        print(
            f"\nSame semantics, checked ({'with' if books else 'without'} books): mean "
            f"response {np.nanmean(ours['response']):.3f} s (engine) vs "
            f"{np.nanmean(response):.3f} s (SimPy); per workflow, median relative difference "
            f"{np.nanmedian(rel):.1e}, {np.mean(rel < 1e-6):.1%} within 1e-6, "
            f"{np.mean(rel < 0.01):.1%} within 1%, max {np.nanmax(rel):.1e}."
        )


if __name__ == "__main__":
    main()
