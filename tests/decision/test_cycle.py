"""The one decision cycle: what ``drive`` asks, answers and applies, for a pulling executor
(the simulator) and a pushing one (a stand-in with a queue), and the ``Watched`` wrapper."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import BatchExecutor, Executor, Watched, drive
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.scenario import Scenario, build_jobs


class QueueExecutor:
    """A pushing executor: offers what waits now, records what was applied."""

    def __init__(self, waiting: list[int]) -> None:
        self.waiting = deque(waiting)
        self.asked: int | None = None
        self.applied: list[tuple[int, Any]] = []

    def next_decision(self) -> Any:
        if not self.waiting:
            return None
        self.asked = self.waiting.popleft()
        return SimpleNamespace(task=self.asked)

    def apply(self, answer: Any) -> None:
        assert self.asked is not None, "apply without a decision"
        self.applied.append((self.asked, answer))
        self.asked = None


class Echo:
    name, ready_order = "echo", "fifo"

    def reset(self, seed: int) -> None: ...

    def select(self, decision: Any) -> int:
        return int(decision.task) * 10


def test_a_pushing_executor_is_drained_and_can_be_driven_again() -> None:
    ex = QueueExecutor([1, 2, 3])
    assert isinstance(ex, Executor) and not isinstance(ex, BatchExecutor)
    assert drive(ex, Echo()) is None  # type: ignore[arg-type]
    assert ex.applied == [(1, 10), (2, 20), (3, 30)]
    ex.waiting.extend([4])  # more became ready later
    drive(ex, Echo())  # type: ignore[arg-type]
    assert ex.applied[-1] == (4, 40)


def test_until_hands_back_the_unanswered_decision() -> None:
    ex = QueueExecutor([1, 2, 3, 4])
    pending = drive(ex, Echo(), until=lambda: len(ex.applied) == 2)  # type: ignore[arg-type]
    assert pending is not None and pending.task == 3
    assert ex.applied == [(1, 10), (2, 20)]


def _sim(n: int = 8) -> Simulation:
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=20, rate=1.0, seed=3))
    return Simulation(spec, jobs, tables=tables)


def test_watched_sees_every_decision_and_changes_nothing() -> None:
    plain = _sim()
    drive(plain, get_policy("eft"))
    watched_sim = _sim()
    seen: list[int] = []
    watched = Watched(get_policy("eft"), lambda d, answer: seen.append(int(answer)))
    drive(watched_sim, watched)
    assert len(seen) == watched_sim.decisions == plain.decisions > 0
    assert watched.select_s > 0
    assert list(watched_sim.response_times) == list(plain.response_times)


def test_the_simulator_is_a_batch_executor_and_batches_reach_select_batch() -> None:
    sim = _sim()
    assert isinstance(sim, BatchExecutor)
    sizes: list[int] = []

    class Batching(Echo):
        def select(self, decision: Any) -> int:  # pragma: no cover - batch path only
            raise AssertionError("select_batch expected")

        def select_batch(self, decisions: list[Any]) -> list[int]:
            sizes.append(len(decisions))
            return [int(d.mask.nonzero()[0][0]) for d in decisions]

    drive(sim, Batching())  # type: ignore[arg-type]
    assert sum(sizes) == sim.decisions and sim.done
