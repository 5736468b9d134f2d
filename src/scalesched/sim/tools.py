"""Tool execution, a part of the simulation: a tool task takes one CPU core of its server
(FIFO queue when all are busy) for ``cpu_work / core_speed`` seconds, then waits
``ext_latency`` seconds on the outside world holding no core; a repeated call may take its
original's result from the tool cache instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalesched.sim.events import CPU_DONE as _CPU_DONE
from scalesched.sim.events import TASK_DONE as _TASK_DONE
from scalesched.sim.tool_cache import LOOKUP_S
from scalesched.workload.instance import TaskInstance

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


class ToolServers:
    """The CPU side of every server: cores, their queues and busy integrals."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def cpu_account(self, s: int) -> None:
        sim = self.sim
        sim._cpu_area[s] += sim._busy_cores[s] * (sim.now - sim._cpu_mark[s])
        sim._cpu_mark[s] = sim.now

    def cache_hit(self, gid: int) -> bool:
        """A repeated tool call whose original has finished takes its result: done after
        ``LOOKUP_S``, holding no core (``scalesched.sim.tool_cache``). False: run it."""
        sim = self.sim
        task, tasks = sim._task(gid), sim.tasks
        ji = tasks.job_of[gid]
        assert task.repeat_of is not None and sim._tool_cache is not None  # see sim.transfers
        if not sim.task_done[tasks.offset[ji] + task.repeat_of]:
            return False
        s = sim.server[gid]
        speed = sim._speed[s]
        sim.started_at[gid] = sim.now
        sim.cpu_backlog[s] = max(0.0, sim.cpu_backlog[s] - task.cpu_work / speed)
        sim.tools_in_flight[s] -= 1
        saved = task.cpu_work / speed + task.ext_latency - LOOKUP_S
        sim._tool_cache.hit(ji, saved)
        if sim.skipped_s is not None:
            sim.skipped_s[gid] = saved
        sim._push(sim.now + LOOKUP_S, _TASK_DONE, gid, 0)
        return True

    def start_tool(self, gid: int, s: int, task: TaskInstance) -> None:
        sim = self.sim
        self.cpu_account(s)
        sim._busy_cores[s] += 1
        sim.busy_cores[s] += 1
        sim.started_at[gid] = sim.now
        sim._cpu_running.add(gid)
        sim._push(sim.now + task.cpu_work / sim._speed[s], _CPU_DONE, gid, 0)

    def on_cpu_done(self, gid: int, _: int) -> None:
        sim = self.sim
        if sim._cancelled[gid]:
            return
        sim._cpu_running.discard(gid)
        sim.release_deferred()
        s = sim.server[gid]
        task = sim._task(gid)
        self.cpu_account(s)
        sim._busy_cores[s] -= 1
        sim.busy_cores[s] -= 1
        sim.cpu_backlog[s] = max(0.0, sim.cpu_backlog[s] - task.cpu_work / sim._speed[s])
        queue = sim._cpu_queue[s]
        if queue:
            nxt = queue.popleft()
            self.start_tool(nxt, s, sim._task(nxt))
        self.after_cpu(gid, task)

    def after_cpu(self, gid: int, task: TaskInstance) -> None:
        sim = self.sim
        sim.tools_in_flight[sim.server[gid]] -= 1
        if task.ext_latency > 0:
            sim._push(sim.now + task.ext_latency, _TASK_DONE, gid, 0)
        else:
            sim._finish(gid)

    def cancel(self, y: int, s: int, task: TaskInstance, landed: bool, started: bool) -> None:
        """Stop tool copy ``y`` on server ``s``: its core (a queued one takes it) or its
        place in the queue; a copy waiting on the outside world holds nothing."""
        sim = self.sim
        running = y in sim._cpu_running
        if not started or running:  # its CPU part is still counted on the server
            sim.cpu_backlog[s] = max(0.0, sim.cpu_backlog[s] - task.cpu_work / sim._speed[s])
            sim.tools_in_flight[s] -= 1
        if running:
            sim._cpu_running.discard(y)
            sim.extra_server_seconds += sim.now - sim.started_at[y]
            self.cpu_account(s)
            sim._busy_cores[s] -= 1
            sim.busy_cores[s] -= 1
            queue = sim._cpu_queue[s]
            if queue:
                nxt = queue.popleft()
                self.start_tool(nxt, s, sim._task(nxt))
        elif landed and not started:
            sim._cpu_queue[s].remove(y)
