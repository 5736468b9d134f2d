"""The LoadReplica action: its checks, and the ledger refusing it where no simulator
carries it out (the Ray runtime shares the ledger)."""

from __future__ import annotations

import math

import pytest
from test_ledger import TABLES, Ledger, chain_jobs, decide

from scalesched.decision import Defer, Hedge, LoadReplica, Place, as_action
from scalesched.decision.actions import REPLICA_IDLE_S
from scalesched.decision.scheduler import SchedulingError


@pytest.mark.parametrize("idle_s", [0.0, -1.0, math.nan, -math.inf])
def test_idle_time_must_be_positive(idle_s: float) -> None:
    with pytest.raises(ValueError, match="idle_s"):
        LoadReplica("phi-2", 0, idle_s)


def test_defaults_and_loads_on_every_action() -> None:
    load = LoadReplica("phi-2", 1)
    assert load.idle_s == REPLICA_IDLE_S and LoadReplica("phi-2", 1, math.inf).idle_s > 0
    for action in (Place(0, loads=(load,)), Hedge((0, 1), loads=(load,)), Defer(loads=(load,))):
        assert as_action(action).loads == (load,)
    assert Place(0).loads == () and as_action(3) == Place(3)


@pytest.mark.parametrize("answer", [Place(0, loads=(LoadReplica("llama-2-7b", 1),))], ids=str)
def test_the_ledger_refuses_loads(answer: Place) -> None:
    ledger = Ledger(TABLES, chain_jobs())
    ledger.arrive(0, 0.0)
    gid = ledger.pending.popleft()
    with pytest.raises(SchedulingError, match="need the simulator"):
        ledger.accept(gid, decide(ledger, gid), answer)
    assert ledger.decisions == 0
