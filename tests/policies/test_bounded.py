"""The bounded candidate set: a learned policy with ``margin`` only ever places on a server
``tail`` (or, with ``bound=eft``, ``eft``) scores within that fraction of its best, checked
on every decision of a run."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.policies.bounded import ScoreMargin, check_margin
from scalesched.policies.eft import eft_choice, eft_scores
from scalesched.policies.tail import TailScheduler
from scalesched.runs.setup import Scenario, prepare, run

pytest.importorskip("torch")

SCENARIO = Scenario(workload="agentic-mix", workflows=60, load=0.9, seed=3, residency="dynamic")


class Recorder(BaseScheduler):
    """Passes every decision to ``inner`` and keeps, per decision, the server chosen and
    the fraction by which its ``tail`` score (``eft``'s with ``bound="eft"``) exceeds the
    best (scored independently)."""

    def __init__(self, inner: BaseScheduler, bound: str = "tail") -> None:
        self.inner, self.name, self.bound = inner, inner.name, bound
        self.tail = TailScheduler()
        self.excess: list[float] = []

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)
        self.tail.reset(seed)

    def select(self, decision: Decision) -> int:
        server = self.inner.select(decision)
        assert isinstance(server, int)
        if self.bound == "eft":
            scores = np.where(decision.mask, decision.finish_s + decision.imposed_s, np.inf)
        else:
            scores = self.tail.scores(decision)
        best = float(np.min(scores))
        assert decision.mask[server]
        self.excess.append(float(scores[server] - best) / abs(best) if best else 0.0)
        return server


def recorded(policy: str, bound: str = "tail") -> list[float]:
    recorder = Recorder(get_policy(policy), bound)  # type: ignore[arg-type]
    run(prepare("hetero-16", SCENARIO), recorder)
    assert recorder.excess, "no decision was recorded"
    return recorder.excess


@pytest.mark.parametrize("margin", [0.0, 0.1])
def test_a_bounded_policy_picks_only_within_the_margin(margin: float) -> None:
    excess = recorded(f"scale-dagger:margin={margin}")
    assert max(excess) <= margin + 1e-9


def test_a_policy_bounded_by_eft_picks_within_eft_s_margin_not_tail_s() -> None:
    """``bound=eft`` measures the margin from eft's score: every choice is within 10% of
    eft's best, and some are not within 10% of tail's (so the two bounds differ)."""
    assert max(recorded("scale-dagger:margin=0.1,bound=eft", bound="eft")) <= 0.1 + 1e-9
    assert max(recorded("scale-dagger:margin=0.1,bound=eft")) > 0.1


def test_the_unbounded_policy_strays_so_the_check_can_fail() -> None:
    """Without the bound the same run places some tasks beyond 10% of tail's best: the
    property above is not true of every policy."""
    assert max(recorded("scale-dagger")) > 0.1


def test_the_margin_is_checked_and_named() -> None:
    with pytest.raises(ValueError, match="margin"):
        check_margin(-0.1)
    with pytest.raises(InputError, match="scale-dagger"):
        get_policy("scale-dagger:margin=20")
    assert get_policy("scale-dagger:margin=0.1").name == "scale-dagger:margin=0.1"
    assert ScoreMargin(0.25).margin == 0.25
    with pytest.raises(InputError, match="bound"):
        get_policy("scale-dagger:margin=0.1,bound=lifo")
    with pytest.raises(InputError, match="needs a margin"):
        get_policy("scale-dagger:bound=eft")


class LoadCounter(Recorder):
    """Passes every decision to ``inner`` and counts the calls it sends to a server without
    their model where ``tail``, asked the same decision, would send it to one with it
    (``extra_loads``), and those of them whose server lacks the free GPUs for the model's
    engine, so that the load evicts an engine or waits for one (``evicting_loads``)."""

    def __init__(self, inner: BaseScheduler) -> None:
        super().__init__(inner)
        self.extra_loads = self.evicting_loads = 0

    def select(self, decision: Decision) -> int:
        server = self.inner.select(decision)
        assert isinstance(server, int)
        absent = decision.model_absent
        extra = bool(absent[server] and not absent[self.tail.select(decision)])
        tp = decision.tables.tp[server, decision.task.model] if extra else 0
        self.extra_loads += extra
        self.evicting_loads += extra and decision.view.free_gpus[server] < tp
        return server


@pytest.mark.parametrize(
    ("policy", "extra", "evicting"),
    [
        ("scale-dagger:margin=0.5", True, True),
        ("scale-dagger:margin=0.5,loads=bound", False, False),
        ("scale-dagger:margin=0.5,loads=free", True, False),
    ],
)
def test_loads_rules_start_only_the_model_loads_they_allow(
    policy: str, extra: bool, evicting: bool
) -> None:
    """With ``loads=bound`` the network starts only the loads ``tail``'s pick would start;
    with ``loads=free`` others too, but none that needs an engine evicted; with a wide
    margin and no rule it starts evicting ones (so both checks can fail)."""
    counter = LoadCounter(get_policy(policy))  # type: ignore[arg-type]
    run(prepare("hetero-16", SCENARIO), counter)
    assert (counter.extra_loads > 0) == extra
    assert (counter.evicting_loads > 0) == evicting


class EftLoadCounter(Recorder):
    """Counts the calls ``inner`` sends to a server without their model where ``eft``,
    asked the same decision, would send them to one with it."""

    def __init__(self, inner: BaseScheduler) -> None:
        super().__init__(inner)
        self.loads_eft_would_not = 0

    def select(self, decision: Decision) -> int:
        server = self.inner.select(decision)
        assert isinstance(server, int)
        absent = decision.model_absent
        self.loads_eft_would_not += bool(absent[server] and not absent[eft_choice(decision)])
        return server


@pytest.mark.parametrize(
    ("policy", "loads_eft_would_not"),
    [("scale-dagger:margin=0.5", True), ("scale-dagger:margin=0.5,loads=eft", False)],
)
def test_loads_eft_starts_a_load_only_where_eft_would(
    policy: str, loads_eft_would_not: bool
) -> None:
    """With ``loads=eft`` no call goes to a server without its model while ``eft``'s pick
    has it; without a rule some do (so the check can fail)."""
    counter = EftLoadCounter(get_policy(policy))  # type: ignore[arg-type]
    run(prepare("hetero-16", SCENARIO), counter)
    assert (counter.loads_eft_would_not > 0) == loads_eft_would_not


def test_loads_eft_falls_back_on_eft_s_pick_when_nothing_is_left() -> None:
    """Where every server within the margin lacks the model and ``eft``'s pick has it, the
    set is ``eft``'s pick alone: never empty while a server is feasible."""
    allowed = np.array([True, True, False, False])

    class Stub:
        mask = np.array([True, True, True, True])
        finish_s = np.array([5.0, 6.0, 1.0, 9.0])
        imposed_s = np.zeros(4)
        model_absent = np.array([True, True, False, False])

    kept = ScoreMargin._loads_as_eft(Stub(), None, allowed)  # type: ignore[arg-type]
    assert kept.tolist() == [False, False, True, False]


def test_the_load_rules_change_nothing_on_a_deployment() -> None:
    """A planned deployment starts no model load (a call goes only to a server holding its
    model), so every load rule acts the same there, and ``bound=auto`` is ``tail``'s bound:
    the suite's planned rows and the demo do not move with ``loads`` or ``bound``."""
    planned = prepare("hetero-8", Scenario(workflows=60, load=0.9, seed=3, residency="planned"))

    def mean(policy: str) -> float:
        return float(run(planned, policy).metrics["avg_response_time_s"])

    assert mean("scale-safe:loads=free") == mean("scale-safe:loads=any")
    assert mean("scale-safe:loads=eft") == mean("scale-safe:loads=any")
    assert mean("scale-safe:bound=auto") == mean("scale-safe:bound=tail")


class AutoRecorder(Recorder):
    """Keeps, per decision, whether ``tail``'s pick had to wait for GPUs to load the call's
    model, and the chosen server's excess over the best of the score ``bound=auto`` is
    meant to follow there: ``eft``'s where it waits, ``tail``'s elsewhere."""

    def __init__(self, inner: BaseScheduler) -> None:
        super().__init__(inner)
        self.followed: list[tuple[bool, float]] = []

    def select(self, decision: Decision) -> int:
        tail_scores = self.tail.scores(decision)
        waits = bool(decision.load_waits[int(np.argmin(tail_scores))])
        scores = eft_scores(decision) if waits else tail_scores
        server = self.inner.select(decision)
        assert isinstance(server, int)
        best = float(np.min(scores))
        self.followed.append((waits, float(scores[server] - best) / abs(best) if best else 0.0))
        return server


def test_bound_auto_follows_eft_where_tail_s_load_would_wait_for_gpus() -> None:
    """``bound=auto`` measures the margin from ``tail``'s score, but from ``eft``'s where
    ``tail``'s pick lacks the call's model and its free and idle GPUs cannot hold the
    engine. The run has decisions of both kinds (so either check can fail)."""
    recorder = AutoRecorder(get_policy("scale-dagger:margin=0.1,bound=auto"))  # type: ignore[arg-type]
    run(prepare("configs/clusters/l4-lab.yaml", SCENARIO), recorder)
    waits = [excess for waited, excess in recorder.followed if waited]
    free = [excess for waited, excess in recorder.followed if not waited]
    assert waits and free
    assert max(waits) <= 0.1 + 1e-9
    assert max(free) <= 0.1 + 1e-9
