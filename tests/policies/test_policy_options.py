"""Policy options where a policy is named (``NAME:KEY=VALUE,...``): converted by the
parameter's type, refused with one line naming the policy and the option, and the
scheduler named by its spec so results never mix two option sets."""

from __future__ import annotations

import pytest

from scalesched.errors import InputError
from scalesched.policies import HEURISTICS, ORACLES, base_name, get_policy, is_learned
from scalesched.policies.options import policy_options, split_policy_list, split_spec
from scalesched.policies.rollout import RolloutScheduler, SampledRolloutScheduler
from scalesched.policies.tail import TailScheduler


def test_options_are_converted_and_the_spec_names_the_scheduler() -> None:
    policy = get_policy("rollout:candidates=4, horizon_s=10,max_decision_s=none")
    assert isinstance(policy, SampledRolloutScheduler)
    assert (policy.candidates, policy.horizon_s, policy.max_decision_s) == (4, 10.0, None)
    assert policy.name == "rollout:candidates=4,horizon_s=10.0,max_decision_s=None"
    tail = get_policy("tail:level=0.5,via=finish")
    assert isinstance(tail, TailScheduler) and (tail.level, tail.via) == (0.5, "finish")
    oracle = get_policy("rollout_oracle:base=least_loaded")
    assert isinstance(oracle, RolloutScheduler) and oracle.base == "least_loaded"


def test_a_name_without_options_is_the_registered_policy() -> None:
    assert get_policy("tail").name == "tail"
    assert split_spec("tail") == ("tail", None)


def test_object_parameters_are_not_options() -> None:
    """A base scheduler, a predictor or a sampler cannot be written on a command line."""
    rollout = policy_options(SampledRolloutScheduler)
    assert {"candidates", "horizon_s", "forks", "base"} <= set(rollout)
    assert not {"base_policy", "sampler", "stats"} & set(rollout)
    assert "predictor" not in policy_options(TailScheduler)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("rollout:candidates=x", "rollout:candidates"),
        ("rollout:nope=1", "unknown option; options: base, candidates"),
        ("rollout:candidates", "is not KEY=VALUE"),
        ("rollout:forks=2,forks=3", "given twice"),
        ("tail:level=0.33", "level must be one of"),
        ("tail:via=median", "tail:via"),
        ("eft:anything=1", "unknown option; options: none"),
        ("rollout:candidates=1", "need candidates >= 2"),
        ("scale-dagger:temperature=2", "scale-dagger:temperature: unknown option; options: greedy"),
        ("scale-dagger:greedy=maybe", "scale-dagger:greedy: 'maybe'"),
    ],
)
def test_bad_options_are_one_line_errors(spec: str, says: str) -> None:
    with pytest.raises(InputError) as caught:
        get_policy(spec)
    text = str(caught.value)
    assert says in text and "\n" not in text and text.startswith("--policy")


def test_every_registered_policy_lists_plain_options_only() -> None:
    for name, (factory, _) in {**HEURISTICS, **ORACLES}.items():
        for key, (_, default) in policy_options(factory).items():
            assert default is None or isinstance(default, int | float | str), (name, key)


def test_base_name_and_is_learned_see_through_options() -> None:
    assert base_name("rollout:horizon_s=10") == "rollout"
    assert base_name("runs/x:y.pt") == "runs/x:y.pt"  # not a registered name: a path
    assert not is_learned("tail:level=0.5") and not is_learned("rollout_oracle")
    assert is_learned("scale") and is_learned("runs/model.pt")


def test_a_policy_list_keeps_each_specs_options_together() -> None:
    text = "eft, rollout:candidates=4,horizon_s=10,tail,tail:level=0.5"
    assert split_policy_list(text) == (
        "eft",
        "rollout:candidates=4,horizon_s=10",
        "tail",
        "tail:level=0.5",
    )


def test_a_trained_policy_takes_its_acting_option() -> None:
    from scalesched.nn.scheduler import NetworkScheduler

    greedy = get_policy("scale-dagger:greedy=true")
    assert isinstance(greedy, NetworkScheduler) and greedy.greedy
    assert greedy.name == "scale-dagger:greedy=True"
    sampled = get_policy("scale-dagger")
    assert isinstance(sampled, NetworkScheduler) and not sampled.greedy
    assert sampled.name == "scale-dagger"
    ordered = get_policy("fcfs_workflow:placement=scale-dagger:greedy=true")
    assert ordered._placer.name == "scale-dagger:greedy=True"  # type: ignore[attr-defined]
