"""The ordering baselines place exactly as ``tail`` and order by what they say they do;
``TaskRequest.attained_s`` is the service the workflow's finished tasks have had."""

from __future__ import annotations

import math

import pytest

from scalesched.decision.actions import Place
from scalesched.decision.cycle import drive
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.policies.tail import TailScheduler
from scalesched.runs.setup import Scenario, prepare
from scalesched.sim.engine import Simulation

SCENARIO = Scenario(workload="agentic-mix", workflows=40, load=0.9, seed=3)


class Checked(BaseScheduler):
    """Asks ``inner`` and ``tail`` the same decision; records both answers and the state."""

    def __init__(self, inner: BaseScheduler, sim_ref: list[Simulation]) -> None:
        self.inner, self.tail, self.sim_ref = inner, TailScheduler(), sim_ref
        self.name = inner.name
        self.seen: list[tuple[Place, int, Decision, int]] = []

    def select(self, decision: Decision) -> Place:
        answer = self.inner.select(decision)
        assert isinstance(answer, Place)
        sim = self.sim_ref[0]
        gid = sim.current_task
        assert gid is not None
        self.seen.append((answer, int(self.tail.select(decision)), decision, gid))
        return answer


def run_checked(name: str) -> tuple[Checked, Simulation]:
    setup = prepare("hetero-16", SCENARIO)
    sim = Simulation(setup.tables.spec, setup.jobs, tables=setup.tables, record_trace=True)
    checked = Checked(get_policy(name), [sim])  # type: ignore[arg-type]
    drive(sim, checked)
    return checked, sim


@pytest.mark.parametrize("name", ["plas", "shortest_remaining", "fcfs_workflow"])
def test_ordering_baselines_place_as_tail_and_give_their_key(name: str) -> None:
    checked, sim = run_checked(name)
    assert sim.done and checked.seen
    for answer, tail_server, decision, _ in checked.seen:
        assert answer.server == tail_server
        task = decision.task
        expected = {
            "plas": task.attained_s,
            "shortest_remaining": task.rank,
            "fcfs_workflow": decision.now - task.workflow_age,
        }[name]
        assert answer.priority == expected


def test_attained_service_is_the_finished_tasks_time() -> None:
    checked, sim = run_checked("plas")
    job_of = sim.tasks.job_of
    spans: dict[int, list[tuple[float, float]]] = {}
    for r in sim.trace:
        spans.setdefault(r.workflow, []).append((r.start, r.end))
    workflow_id = {ji: job.workflow_id for ji, job in enumerate(sim.jobs)}
    nonzero = 0
    for _, _, decision, gid in checked.seen:
        done = [e - s for s, e in spans[workflow_id[job_of[gid]]] if e <= decision.now]
        assert decision.task.attained_s == pytest.approx(math.fsum(done), abs=1e-9)
        nonzero += decision.task.attained_s > 0
    assert nonzero > 0  # later calls of a workflow see its earlier ones


def test_placement_option_takes_the_servers_from_another_policy() -> None:
    """``fcfs_workflow:placement=eft`` places every task where eft does and orders it by
    workflow age; the run differs from tail's placement with the same order."""
    ordered, eft = get_policy("fcfs_workflow:placement=eft"), get_policy("eft")
    setup = prepare("hetero-16", SCENARIO)
    sim = Simulation(setup.tables.spec, setup.jobs, tables=setup.tables)
    seen: list[tuple[Place, Decision]] = []
    eft_answers: list[int] = []

    class Both(BaseScheduler):
        name = "both"

        def select(self, decision: Decision) -> Place:
            answer = ordered.select(decision)
            eft_answers.append(int(eft.select(decision)))  # type: ignore[arg-type]
            assert isinstance(answer, Place)
            seen.append((answer, decision))
            return answer

    drive(sim, Both())
    assert sim.done and seen
    assert [a.server for a, _ in seen] == eft_answers
    assert all(a.priority == d.now - d.task.workflow_age for a, d in seen)
    checked, _ = run_checked("fcfs_workflow")
    assert [a.server for a, *_ in checked.seen] != eft_answers


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("fcfs_workflow:placement=plas", "'plas' is not a placement policy; known: tail"),
        ("plas:placement=nosuch", "'nosuch' is not a placement policy"),
    ],
)
def test_placement_option_refuses_what_is_not_a_placement(spec: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        get_policy(spec)


@pytest.mark.parametrize("cap", [0.0, 30.0])
def test_a_capped_workflow_order_credits_at_most_the_cap(cap: float) -> None:
    checked, _ = run_checked(f"fcfs_workflow:age_cap_s={cap}")
    ages = [d.task.workflow_age for *_, d, _ in checked.seen]
    assert any(age > cap for age in ages) and any(age < 30.0 for age in ages)
    for answer, tail_server, decision, _ in checked.seen:
        assert answer.server == tail_server
        credit = min(decision.task.workflow_age, cap)
        assert answer.priority == decision.now - credit


def test_an_uncapped_order_is_workflow_order_and_runs_compiled() -> None:
    assert get_policy("fcfs_workflow").compiled_policy == "fcfs_workflow"  # type: ignore[attr-defined]
    assert get_policy("fcfs_workflow:age_cap_s=60").compiled_policy is None  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="age_cap_s"):
        get_policy("fcfs_workflow:age_cap_s=-1")
