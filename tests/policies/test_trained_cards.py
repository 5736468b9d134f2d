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
    """Every shipped policy was trained with dynamic residency, and its file says so."""
    saved = load_checkpoint(shipped_policies()[name])
    assert saved["config"]["residency"] == saved["metadata"]["residency"] == "dynamic"
    assert describe(name).split(". Measured")[0].endswith("(dynamic residency)")


def test_a_checkpoint_from_before_the_field_was_trained_with_dynamic_residency() -> None:
    assert training_facts({"config": {"cluster": "hetero-16", "workload": "w"}})["residency"] == (
        "dynamic"
    )
    planned = training_facts({"config": {"cluster": "c", "workload": "w", "residency": "planned"}})
    assert planned["residency"] == "planned"
