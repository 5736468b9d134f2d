"""Input transfers, a part of the simulation: a placed task (or hedged copy) waits for its
inputs to travel from each parent's server (latency + bytes / min(NIC bandwidths), free on
the same server, no link contention), then lands on its server, where it joins the LLM
engines (``_llm``) or the tool servers (``_tools``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalesched.decision.features import Decision
from scalesched.sim.events import LAND as _LAND

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


class InputTransfers:
    """Launches placed tasks: their inputs' travel, and where they go when they land."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.nic: list[float] = sim.tables.nic_bytes_per_s.tolist()  # the same doubles
        """Each server's NIC bandwidth (bytes/s), as floats for the per-edge arithmetic."""

    def launch(self, gid: int, server: int, decision: Decision) -> None:
        """Send task (or copy) ``gid`` to ``server``: its inputs travel, then it lands."""
        sim = self.sim
        est = float(decision.exec_s[server])
        sim._est[gid] = est
        sim.book(gid, server, est)
        delay = self.move_inputs(sim.origin[gid], server)
        if delay > 0:
            sim._push(sim.now + delay, _LAND, gid, 0)
        else:
            self.on_land(gid, 0)

    def move_inputs(self, gid: int, dst: int) -> float:
        """Seconds until the last input of task ``gid`` reaches server ``dst`` (the bytes
        that cross servers are counted in ``bytes_moved``)."""
        sim = self.sim
        ji = sim.tasks.job_of[gid]
        wf = sim.jobs[ji].workflow
        off = sim.tasks.offset[ji]
        i = gid - off
        nic, latency, server = self.nic, sim.tables.latency_s, sim.server
        delay = 0.0
        for p in wf.parents[i]:
            src = server[off + p]
            nbytes = wf.edge_bytes.get((p, i), 0.0)
            if src == dst or nbytes <= 0:
                continue
            bw = min(nic[src], nic[dst])
            sim.bytes_moved += nbytes
            x = latency + nbytes / bw
            if x > delay:  # max(delay, x), without the builtin's call
                delay = x
        return delay

    def on_land(self, gid: int, _: int) -> None:
        """The last input landed: an LLM call joins its engine; a tool call takes its
        original's cached result, a free core, or a place in the server's CPU queue."""
        sim = self.sim
        if sim._cancelled[gid]:
            return
        sim.landed_at[gid] = sim.now
        s = sim.server[gid]
        task = sim._task(gid)
        if task.kind == "llm":
            sim._llm.arrive(gid, s, task)
        elif (
            task.repeat_of is not None and sim._tool_cache is not None and sim._tools.cache_hit(gid)
        ):
            return
        elif task.cpu_work <= 0:
            sim.started_at[gid] = sim.now
            sim._tools.after_cpu(gid, task)
        elif sim._busy_cores[s] < sim._cores[s]:
            sim._tools.start_tool(gid, s, task)
        else:
            sim._cpu_queue[s].append(gid)
