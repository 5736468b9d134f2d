"""DAgger's ``learn_order``: the ordering head is added to a network without one, learns
the expert's admission order, and with ``fit_placement: false`` leaves the placement as
the init's, weight for weight."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from scalesched.errors import InputError
from scalesched.nn.checkpoint import load_checkpoint
from scalesched.nn.scheduler import NetworkScheduler
from scalesched.policies import get_policy
from scalesched.policies.trained import checkpoint_path
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.train.dagger import (
    Dataset,
    Labeller,
    fit,
    load_config,
    load_student,
    train,
)
from tests.train.test_dagger import tiny

torch.set_num_threads(1)

BUSY = Scenario(workload="agentic-mix", workflows=40, load=1.0, seed=100_321)


def _labels(expert: str) -> list[float]:
    net, _ = load_student("scale", ordering_head=True)
    data = Dataset()
    labeller = Labeller(NetworkScheduler(net, name="s"), get_policy(expert), 1.0, data, 0)
    run(prepare("hetero-16", BUSY), labeller, warmup=0, cooldown=0)
    return data.order


def test_order_labels_are_workflow_order_for_fcfs_workflow_and_none_for_tail() -> None:
    assert set(_labels("fcfs_workflow")) == {1.0}
    assert set(_labels("tail")) == {0.0}


def test_a_lookahead_expert_labels_only_calls_whose_order_matters() -> None:
    labels = _labels("order_rollout:horizon_s=5")
    nan = [x for x in labels if math.isnan(x)]
    assert 0 < len(nan) < len(labels)  # calls that would not wait carry no label
    assert {x for x in labels if not math.isnan(x)} <= {0.0, 1.0}


def test_fitting_skips_unlabelled_orders(tmp_path: Path) -> None:
    net, _ = load_student("scale", ordering_head=True)
    data = Dataset()
    labeller = Labeller(NetworkScheduler(net, name="s"), get_policy("fcfs_workflow"), 1.0, data, 0)
    run(prepare("hetero-16", BUSY), labeller, warmup=0, cooldown=0)
    data.order = [math.nan if i % 2 else 1.0 for i in range(len(data.order))]
    cfg = tiny(tmp_path, expert="fcfs_workflow", learn_order=True, fit_placement=False, epochs=30)
    head = net.order_head
    assert isinstance(head, torch.nn.Module)
    figures = fit(net, data, cfg, torch.optim.Adam(head.parameters(), lr=3e-3),
                  torch.Generator().manual_seed(0))  # fmt: skip
    assert math.isfinite(figures["order"]) and figures["order_labelled"] == pytest.approx(0.5, 0.01)
    assert figures["order_accuracy"] == 1.0


def test_a_head_with_no_order_label_is_left_as_it_was(tmp_path: Path) -> None:
    net, _ = load_student("scale", ordering_head=True)
    data = Dataset()
    labeller = Labeller(NetworkScheduler(net, name="s"), get_policy("tail"), 1.0, data, 0)
    run(prepare("hetero-16", BUSY), labeller, warmup=0, cooldown=0)
    data.order = [math.nan] * len(data.order)
    cfg = tiny(tmp_path, expert="tail", learn_order=True, fit_placement=False)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    head = net.order_head
    assert isinstance(head, torch.nn.Module)
    fit(net, data, cfg, torch.optim.Adam(head.parameters()), torch.Generator().manual_seed(0))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_an_expert_ordering_otherwise_is_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match="learn_order: expert plas orders by another"):
        _labels("plas")


def test_the_head_is_added_fresh_and_the_rest_kept() -> None:
    plain, _ = load_student("scale")
    grown, saved = load_student("scale", ordering_head=True)
    assert saved["network_config"]["ordering_head"] is True
    ours = grown.state_dict()
    assert any(k.startswith("order_head.") for k in ours)
    for name, weight in plain.state_dict().items():
        assert torch.equal(ours[name], weight)


def test_fitting_the_head_alone_learns_workflow_order_and_keeps_the_placement(
    tmp_path: Path,
) -> None:
    cfg = tiny(tmp_path, expert="fcfs_workflow", learn_order=True, fit_placement=False,
               epochs=30, lr=3e-3, workflows=30)  # fmt: skip
    rows = train(cfg)
    assert rows[0]["order_accuracy"] == 1.0  # every label is workflow order
    saved = load_checkpoint(tmp_path / "best.pt")
    assert saved["network_config"]["ordering_head"] is True
    init = load_checkpoint(checkpoint_path("scale"))["state_dict"]
    for name, weight in init.items():  # the placement, weight for weight
        assert torch.equal(saved["state_dict"][name], weight)
    policy = get_policy(str(tmp_path / "best.pt"))
    assert isinstance(policy, NetworkScheduler) and policy.actor is not None
    assert policy.actor.orders


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"learn_order": True, "order_by_expert": True, "expert": "fcfs_workflow"},
         "learn_order"),
        ({"fit_placement": False}, "fit_placement"),
    ],
)  # fmt: skip
def test_inconsistent_order_fields_are_refused(fields: dict[str, object], where: str) -> None:
    with pytest.raises(InputError, match=where):
        load_config(None, set_fields=fields)
