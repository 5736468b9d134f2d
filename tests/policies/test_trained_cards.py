"""Each shipped trained policy has a card (policies/trained/cards.json) that matches its
checkpoint, and ``scalesched policies`` gives each one its own line from it."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.nn.checkpoint import load_checkpoint
from scalesched.policies.trained import cards, describe, shipped_policies, training_facts


def test_every_shipped_policy_has_a_card_and_no_card_is_stale() -> None:
    assert set(cards()) == set(shipped_policies())


@pytest.mark.parametrize("name", sorted(shipped_policies()))
def test_a_card_says_what_its_checkpoint_was_trained_on(name: str) -> None:
    """Regenerate with scripts/derive/policy_cards.py when a checkpoint changes."""
    assert cards()[name]["trained"] == training_facts(load_checkpoint(shipped_policies()[name]))


@pytest.mark.parametrize("name", sorted(shipped_policies()))
def test_a_card_has_a_dated_headline(name: str) -> None:
    assert re.search(r"\(.*2026-\d\d-\d\d\)$", cards()[name]["measured"])


def test_the_descriptions_differ_and_name_the_training() -> None:
    lines = {name: describe(name) for name in shipped_policies()}
    assert len(set(lines.values())) == len(lines)
    dagger = "expert iteration towards tail from scale, on hetero-16: agentic-mix at load 0.9"
    assert lines["scale-dagger"].startswith(dagger)
    assert "shown p90 output lengths" in lines["scale-p90"]
    assert "skewed-1h-16" in lines["scale-p90"]
    assert "tool-heavy at load 0.9, coordinator at load 0.7" in lines["scale-dagger-mix"]
    assert lines["scale"].startswith("PPO with SRR, on hetero-16: agentic-mix at loads 0.4-0.95")
    assert "scalable-softmax" in lines["scale-ssm"] and "PPO without SRR" in lines["scale-ssm"]
    assert "MLP over exactly 16 servers" in lines["mlp-16"]
    assert describe("not-shipped") == "shipped trained policy (see docs/model-card.md)"


def test_the_policies_listing_prints_each_card() -> None:
    result = CliRunner().invoke(app, ["policies", "--json"])
    assert result.exit_code == 0, result.stderr
    by_name = {row["name"]: row["description"] for row in json.loads(result.stdout)}
    for name in shipped_policies():
        assert by_name[name] == describe(name)


@pytest.mark.parametrize("name", sorted(shipped_policies()))
def test_a_shipped_checkpoint_names_the_world_it_was_trained_in(name: str) -> None:
    """Every shipped policy says the worlds it was trained in, in its file and its line:
    dynamic residency, or both worlds where its settings name theirs (``scale-safe``)."""
    saved = load_checkpoint(shipped_policies()[name])
    worlds = training_facts(saved)["residency"]
    assert saved["metadata"]["residency"] == worlds
    assert worlds == ("dynamic+planned" if name == "scale-safe" else "dynamic")
    words = {"dynamic": "(dynamic residency)",
             "dynamic+planned": "(planned deployments and dynamic residency)"}  # fmt: skip
    assert words[worlds] in describe(name)


def test_a_checkpoint_from_before_the_field_was_trained_with_dynamic_residency() -> None:
    assert training_facts({"config": {"cluster": "hetero-16", "workload": "w"}})["residency"] == (
        "dynamic"
    )
    planned = training_facts({"config": {"cluster": "c", "workload": "w", "residency": "planned"}})
    assert planned["residency"] == "planned"


def test_a_policy_shipped_bounded_acts_bounded_unless_told_otherwise() -> None:
    """``scale-safe``'s card ships it with margin 0.05 in workflow order, starting only the
    model loads ``loads=free`` allows, bounded by ``tail`` or by ``eft`` where ``tail``'s
    load would wait for GPUs (``bound=auto``): the plain name acts exactly as its checkpoint
    with those options, and an option given overrides the card's."""
    from scalesched.policies import get_policy
    from scalesched.policies.trained import shipped_acting, shipped_policies
    from scalesched.runs.setup import Scenario, prepare, run

    shipped = {"margin": 0.05, "order": "workflow", "loads": "free", "bound": "auto"}
    assert shipped_acting("scale-safe") == shipped
    assert shipped_acting("scale-dagger") == {} and shipped_acting("no-such") == {}
    path = shipped_policies()["scale-safe"]
    setup = prepare("hetero-8", Scenario(workload="agentic-mix", workflows=40, load=0.9, seed=3))

    def mean(policy: str) -> float:
        return float(run(setup, policy, warmup=0, cooldown=0).metrics["avg_response_time_s"])

    card = "order=workflow,loads=free,bound=auto"
    assert mean("scale-safe") == mean(f"{path}:margin=0.05,{card}")
    assert mean("scale-safe:margin=0.5") == mean(f"{path}:margin=0.5,{card}")
    assert mean("scale-safe:order=own") == mean(f"{path}:margin=0.05,loads=free,bound=auto")
    assert mean("scale-safe:loads=any") == mean(f"{path}:margin=0.05,order=workflow,bound=auto")
    plain = "order=workflow,loads=free"
    assert mean("scale-safe:bound=tail") == mean(f"{path}:margin=0.05,{plain}")
    capped = mean("scale-safe:age_cap_s=20")
    assert capped == mean(f"{path}:margin=0.05,{card},age_cap_s=20")
    assert get_policy("scale-safe").name == "scale-safe"
    assert get_policy("scale-safe:margin=0.5").name == "scale-safe:margin=0.5"


def test_a_trained_policy_admits_in_workflow_order_when_told() -> None:
    """``order=workflow`` (with ``age_cap_s``) is ``fcfs_workflow`` over the network's own
    placement: the same run as naming it as ``fcfs_workflow``'s placement, under the
    policy's own name; a cap without that order is refused."""
    from scalesched.errors import InputError
    from scalesched.policies import get_policy
    from scalesched.runs.setup import Scenario, prepare, run

    setup = prepare("hetero-8", Scenario(workload="agentic-mix", workflows=60, load=0.9, seed=4))

    def metrics(policy: str) -> dict[str, float]:
        measured = dict(run(setup, policy, warmup=0, cooldown=0).metrics)
        return {k: v for k, v in measured.items() if k not in ("policy", "sim_wall_time_s")}

    ordered = metrics("scale-dagger:order=workflow,age_cap_s=20")
    assert ordered == metrics("fcfs_workflow:placement=scale-dagger,age_cap_s=20")
    assert ordered != metrics("scale-dagger")
    recording = get_policy("scale-dagger:order=workflow")
    assert recording.name == "scale-dagger:order=workflow"
    recording.record_features = True  # type: ignore[attr-defined]  # as the study does
    run(setup, recording, warmup=0, cooldown=0)
    assert 8 in recording.feature_stats()  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="age_cap_s needs order=workflow"):
        get_policy("scale-dagger:age_cap_s=20")
