"""HEFT upward ranks as an executor sees them: over what of each workflow is revealed so
far, recomputed as tasks finish (``VisibleRanks``), for schedulers that order ready tasks by
rank and for the rank feature of a task request."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.workload.instance import WorkflowInstance


def mean_task_costs(tables: ClusterTables, wf: WorkflowInstance) -> list[float]:
    """HEFT's mean execution cost of every task, from estimates only."""
    return [
        tables.mean_llm_time(MODEL_INDEX[t.model], t.prompt_tokens, t.output_tokens_est)
        if t.kind == "llm" and t.model
        else t.cpu_work / tables.mean_core_speed + t.ext_latency_est
        for t in wf.tasks
    ]


def upward_ranks(
    tables: ClusterTables,
    wf: WorkflowInstance,
    costs: Sequence[float],
    finished: Callable[[int], bool],
) -> list[float]:
    """HEFT upward ranks over the *visible* DAG: a child whose revealing task has not
    ``finished`` does not exist yet for any scheduler."""
    tasks, children, edge_bytes = wf.tasks, wf.children, wf.edge_bytes.get
    transfer = tables.mean_transfer_s
    ranks = [0.0] * len(tasks)
    for i in range(len(tasks) - 1, -1, -1):
        best = 0.0
        for c in children[i]:
            rb = tasks[c].revealed_by
            if rb is not None and not finished(rb):
                continue
            x = transfer(edge_bytes((i, c), 0.0)) + ranks[c]
            if x > best:  # max(best, x), without the builtin's call
                best = x
        ranks[i] = costs[i] + best
    return ranks


def deciders(wf: WorkflowInstance) -> frozenset[int]:
    """The tasks whose completion reveals more of ``wf`` (its ranks must be recomputed)."""
    return frozenset(t.revealed_by for t in wf.tasks if t.revealed_by is not None)


class VisibleRanks:
    """Per-workflow cache of upward ranks over the visible DAG, for a whole run.

    Ranks of a workflow are computed when first asked for and dropped when one of its
    deciding tasks finishes (new tasks became visible) or the workflow completes. ``done``
    is the run's per-task finished flags, indexed like ``offsets[job] + task``. The caches
    are keyed by job, so a streamed run (``kernel.ledger.StreamRanks``) keeps only the
    jobs in flight with the same code.
    """

    def __init__(
        self,
        tables: ClusterTables,
        workflows: Sequence[WorkflowInstance],
        offsets: Sequence[int] | Mapping[int, int],
        done: Sequence[bool] | Mapping[int, bool],
    ) -> None:
        self._tables = tables
        self.mean_costs: Callable[[ClusterTables, WorkflowInstance], list[float]] = mean_task_costs
        """How the costs are computed: this function, or an executor's faster one that gives
        the same list (the compiled core's, ``scalesched.sim.core``)."""
        self._offsets = offsets
        self._done = done
        self._workflows: dict[int, WorkflowInstance] = dict(enumerate(workflows))
        self._ranks: dict[int, list[float] | None] = dict.fromkeys(self._workflows)
        self._costs: dict[int, list[float] | None] = dict.fromkeys(self._workflows)
        self._deciders: dict[int, frozenset[int]] = {}
        """Per job, found at its first finished task (most runs never ask for ranks)."""

    def rank(self, job: int, task: int) -> float:
        ranks = self._ranks[job]
        if ranks is None:
            wf, off, done = self._workflows[job], self._offsets[job], self._done
            costs = self._costs[job]
            if costs is None:
                costs = self._costs[job] = self.mean_costs(self._tables, wf)
            ranks = upward_ranks(self._tables, wf, costs, lambda k: done[off + k])
            self._ranks[job] = ranks
        return ranks[task]

    def flat_boxes(self) -> list[object]:
        """The caches: containers of values never changed in place (a fork copies them
        flat; ``Simulation.fork``)."""
        return [self._workflows, self._ranks, self._costs, self._deciders]

    def task_finished(self, job: int, task: int) -> None:
        found = self._deciders.get(job)
        if found is None:
            found = self._deciders[job] = deciders(self._workflows[job])
        if task in found:
            self._ranks[job] = None

    def workflow_finished(self, job: int) -> None:
        self._ranks[job] = self._costs[job] = None
