"""The run ledger on its own, without an executor: the bookkeeping the simulator and the Ray
runtime share."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision import Defer, Hedge
from scalesched.decision.features import make_decision
from scalesched.decision.scheduler import SchedulingError
from scalesched.kernel.ledger import RunLedger
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

TABLES = ClusterTables(get_cluster("hetero-4"))


def chain_jobs() -> list[Job]:
    """plan -> (search, code) -> answer, twice; listed out of arrival order."""

    def llm(tid: str) -> TaskInstance:
        return TaskInstance(tid, "llm", model="llama-2-7b", prompt_tokens=500, output_tokens=200)

    def tool(tid: str) -> TaskInstance:
        return TaskInstance(tid, "tool", tool="code_exec", cpu_work=1.0)

    tasks = (llm("plan"), tool("search"), tool("code"), llm("answer"))
    parents = ((), (0,), (0,), (1, 2))
    children = ((1, 2), (3,), (3,), ())
    edges = {(0, 1): 1e3, (0, 2): 1e3, (1, 3): 1e3, (2, 3): 1e3}
    wf = WorkflowInstance("chain", "test", tasks, parents, children, edges)
    return [Job(7, 1.0, wf), Job(3, 0.0, wf)]


class Ledger(RunLedger):
    now = 0.0  # the simulator's kind of clock: a number


def decide(ledger: Ledger, gid: int):  # noqa: ANN201 - a Decision
    return make_decision(TABLES, ledger, ledger.request(gid, ledger.now))


def test_arrival_readiness_completion_and_the_record() -> None:
    ledger = Ledger(TABLES, chain_jobs(), record_trace=True)
    assert [j.workflow_id for j in ledger.jobs] == [3, 7]  # arrival order
    ledger.arrive(0, 0.0)
    assert list(ledger.pending) == [0] and ledger.lower_bounds[0] > 0
    gid = ledger.pending.popleft()
    (server,) = ledger.accept(gid, decide(ledger, gid), 0)
    ledger.book(gid, server, 2.0)
    assert ledger.n_assigned[0] == 1 and ledger.engine_batch[0].sum() == 1
    ledger.started_at[gid] = ledger.landed_at[gid] = 0.5
    ledger.unassign(server, 2.0)
    assert ledger.finish(gid, 3.0) == gid and ledger.task_done[gid]
    assert not ledger.release_children(gid, 3.0)
    assert sorted(ledger.pending) == [1, 2]  # both children, now ready at 3.0
    assert ledger.ready_at[1] == ledger.ready_at[2] == 3.0
    for g in (1, 2):
        ledger.pending.remove(g)
        ledger.finish(g, 4.0)
        done = ledger.release_children(g, 4.0)
    assert not done and list(ledger.pending) == [3]  # the join waits for both parents
    ledger.finish(3, 5.0)
    assert ledger.release_children(3, 5.0) and ledger.workflows_completed == 1
    rt = ledger.response_times
    assert rt[0] == 5.0 and np.isnan(rt[1])
    assert [r.task for r in ledger.trace] == ["plan", "search", "code", "answer"]
    record = ledger.run_record(
        policy="p", cluster="c", makespan_s=5.0, utilisation=(np.zeros(4), np.zeros(4)), wall_s=0
    )
    assert record.tasks_completed == 4 and record.decisions == 1
    assert list(record.queue_delays) == [0.0]


def test_answers_are_checked_and_deferral_never_starves() -> None:
    ledger = Ledger(TABLES, chain_jobs())
    ledger.arrive(0, 0.0)
    gid = ledger.pending.popleft()
    decision = decide(ledger, gid)
    cpu_only = int(np.flatnonzero(~decision.mask)[0])
    with pytest.raises(SchedulingError, match="cannot run task plan"):
        ledger.accept(gid, decision, cpu_only)
    assert ledger.accept(gid, decision, Defer()) == () and ledger.deferred == [gid]
    ledger.release_deferred()
    assert list(ledger.pending) == [gid] and not ledger.deferred
    ledger.pending.clear()
    ledger.defer(gid)
    ledger.force_deferred()  # nothing else left to happen
    decision.can_defer = ledger.may_defer(gid)
    assert not decision.can_defer
    with pytest.raises(SchedulingError, match="cannot be deferred"):
        ledger.accept(gid, decision, Defer())
    gpus = tuple(int(s) for s in np.flatnonzero(decision.mask)[:2])
    assert ledger.accept(gid, decision, Hedge(gpus)) == gpus
    assert ledger.hedged_tasks == 1 and ledger.deferrals == 2 and ledger.may_defer(gid)


def test_a_hedged_copy_shares_its_tasks_facts_and_a_dead_server_holds_nothing() -> None:
    ledger = Ledger(TABLES, chain_jobs(), record_trace=True)
    ledger.arrive(0, 0.0)
    copy = ledger.add_copy(0)
    assert copy == ledger.n_tasks and ledger.origin[copy] == 0
    assert ledger.tasks.task(copy).id == "plan" and ledger.ready_at[copy] == 0.0
    ledger.book(0, 0, 1.0)
    ledger.book(copy, 1, 1.0)
    ledger.started_at[copy] = ledger.landed_at[copy] = 0.2
    assert ledger.finish(copy, 2.0) == 0 and ledger.trace[0].server == 1
    ledger.mark_dead(0)
    assert not ledger.alive[0] and ledger.n_assigned[0] == 0 and ledger.engine_batch[0].sum() == 0
