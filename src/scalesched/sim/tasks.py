"""The tasks of one run, by global id: shared by the simulator and the Ray runtime.

A run flattens its jobs' tasks into global ids (``gid = offset[job] + index``) so per-task
state lives in flat lists; this module owns that numbering, the finished flags, the
visible-DAG ranks and what a scheduler may see of a task.
"""

from __future__ import annotations

from collections.abc import Sequence

from scalesched.policies.features import ClusterTables, TaskRequest, VisibleRanks, task_request
from scalesched.workload.instance import Job, TaskInstance


class RunTasks:
    """Global task ids over ``jobs`` and the per-task facts every scheduler reads."""

    def __init__(self, tables: ClusterTables, jobs: Sequence[Job]) -> None:
        self.jobs = jobs
        self.offset: list[int] = []
        self.job_of: list[int] = []
        total = 0
        for ji, job in enumerate(jobs):
            self.offset.append(total)
            total += len(job.workflow.tasks)
            self.job_of.extend([ji] * len(job.workflow.tasks))
        self.n_tasks = total
        self.done = [False] * total
        """Set by the run when a task finishes; ranks read it to know what is visible."""
        self.ranks = VisibleRanks(tables, [j.workflow for j in jobs], self.offset, self.done)

    def task(self, gid: int) -> TaskInstance:
        ji = self.job_of[gid]
        return self.jobs[ji].workflow.tasks[gid - self.offset[ji]]

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
