"""What a network reads: the decision as built, or re-costed at the predicted length."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scalesched.nn.checkpoint import load_checkpoint
from scalesched.nn.observation import observation, observed_lengths
from scalesched.nn.scheduler import NetworkScheduler, network_from_checkpoint
from scalesched.policies.tail import TailScheduler
from scalesched.policies.trained import checkpoint_path
from scalesched.runs.setup import Scenario, prepare
from scalesched.sim.engine import Simulation

torch.set_num_threads(1)


def test_a_p90_network_reads_the_decision_tail_costs() -> None:
    """For every LLM call of a run, the p90 observation is the decision at tail's p90
    length; a tool call, and a network observing the estimate, read the decision as is."""
    setup = prepare("hetero-16", Scenario(workload="agentic-mix", workflows=20, load=0.7, seed=3))
    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables)
    net = network_from_checkpoint(load_checkpoint(checkpoint_path("scale-dagger")))
    p90, plain, tail = (
        NetworkScheduler(net, observed_tokens="p90"),
        NetworkScheduler(net),
        TailScheduler(),
    )
    decision, llm = sim.next_decision(), 0
    while decision is not None:
        dim = plain.server_dim
        mine, as_is = p90.observation(decision), observation(decision, decision.n_servers, dim)
        if decision.task.kind == "llm":
            again = decision.at_output_tokens(tail.output_tokens(decision))
            expected = observation(again, decision.n_servers, dim)
            llm += int(tail.output_tokens(decision) != decision.task.output_tokens_est)
        else:
            expected = as_is
        for key in expected:
            assert np.array_equal(mine[key], expected[key])
            assert np.array_equal(plain.observation(decision)[key], as_is[key])
        sim.apply(tail.select(decision))
        decision = sim.next_decision()
    assert llm > 20  # the predicted length differs from the estimate on many calls


def test_unknown_observed_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="observed_tokens must be one of estimate, p90"):
        observed_lengths("p50")
    assert observed_lengths("estimate") is None
