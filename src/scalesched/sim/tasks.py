"""The tasks of one run, by global id: shared by the simulator and the Ray runtime.

A run flattens its jobs' tasks into global ids (``gid = offset[job] + index``) so per-task
state lives in flat lists; this module owns that numbering, the finished flags, the
visible-DAG ranks and what a scheduler may see of a task.
"""

from __future__ import annotations

from collections.abc import Sequence

from scalesched.decision.features import ClusterTables, TaskRequest, VisibleRanks, task_request
from scalesched.workload.instance import Job, TaskInstance


class RunTasks:
    """Global task ids over ``jobs`` and the per-task facts every scheduler reads."""

    def __init__(self, tables: ClusterTables, jobs: Sequence[Job]) -> None:
        self.jobs = jobs
        self.offset: list[int] = []
        self.job_of: list[int] = []
        self.local: list[int] = []
        """Index of each id's task inside its workflow (copies share their task's)."""
        total = 0
        for ji, job in enumerate(jobs):
            self.offset.append(total)
            total += len(job.workflow.tasks)
            self.job_of.extend([ji] * len(job.workflow.tasks))
            self.local.extend(range(len(job.workflow.tasks)))
        self.n_tasks = total
        """Ids below this are tasks; ids from it on are hedged copies (``add_copy``)."""
        self.done = [False] * total
        """Set by the run when a task finishes; ranks read it to know what is visible."""
        self.ranks = VisibleRanks(tables, [j.workflow for j in jobs], self.offset, self.done)

    def task(self, gid: int) -> TaskInstance:
        return self.jobs[self.job_of[gid]].workflow.tasks[self.local[gid]]

    def add_copy(self, gid: int) -> int:
        """A new id for one more copy of task ``gid`` (a hedge); returns it."""
        self.job_of.append(self.job_of[gid])
        self.local.append(self.local[gid])
        return len(self.job_of) - 1

    def rank(self, gid: int) -> float:
        ji = self.job_of[gid]
        return self.ranks.rank(ji, gid - self.offset[ji])

    def request(self, gid: int, servers: Sequence[int], now: float) -> TaskRequest:
        """The task as a scheduler sees it; ``servers`` holds each placed task's server."""
        ji = self.job_of[gid]
        job = self.jobs[ji]
        off = self.offset[ji]
        i = gid - off
        parents = job.workflow.parents[i]
        return task_request(
            job.workflow,
            i,
            [servers[off + p] for p in parents],
            self.rank(gid),
            now - job.arrival,
        )
