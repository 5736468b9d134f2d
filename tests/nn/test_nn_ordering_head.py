"""The ordering head: the same logit through the numpy actor and the network, a placement
admitted in workflow order exactly where the logit is positive, and a head that never moves
the placement."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

from scalesched.decision.actions import Place, workflow_order
from scalesched.decision.features import BASE_SERVER_FEATURES, TASK_FEATURES
from scalesched.nn import ScaleNet, build_network
from scalesched.nn.fast import FastScaleActor
from scalesched.nn.scheduler import NetworkScheduler
from tests.nn.test_nn_fast import (
    assert_batched_answers_as_one_at_a_time,
    assert_same_logits,
    real_decisions,
    trained_like,
)

torch.set_num_threads(1)


def torch_output(net: ScaleNet, task: np.ndarray, servers: np.ndarray, mask: np.ndarray) -> Any:
    batch, n = mask.shape
    with torch.inference_mode():
        return net(
            torch.as_tensor(task, dtype=torch.float32),
            torch.as_tensor(servers, dtype=torch.float32),
            torch.as_tensor(mask),
            torch.full((batch,), n),
            need_value=False,
        )


@pytest.mark.parametrize("self_attention", [False, True])
@pytest.mark.parametrize("n", [1, 9, 48])
def test_actor_order_logit_equals_the_network(self_attention: bool, n: int) -> None:
    net = trained_like(2, ordering_head=True, server_self_attention=self_attention)
    rng = np.random.default_rng(n)
    task = rng.normal(size=(3, TASK_FEATURES))
    servers = rng.normal(size=(3, n, BASE_SERVER_FEATURES))
    mask = rng.random((3, n)) < 0.6
    mask[:, 0] = True
    want = torch_output(net, task, servers, mask)
    logits, order = FastScaleActor(net).act_batch(task, servers, mask)
    assert order is not None and want.order_logit is not None
    np.testing.assert_allclose(order, want.order_logit.numpy(), rtol=0, atol=1e-4)
    assert_same_logits(want.logits.numpy(), logits, mask)


def test_a_network_without_the_head_gives_no_order() -> None:
    net = trained_like(0)
    assert net.order_head is None and not FastScaleActor(net).orders
    rng = np.random.default_rng(0)
    task = rng.normal(size=(1, TASK_FEATURES))
    servers = rng.normal(size=(1, 4, BASE_SERVER_FEATURES))
    out = torch_output(net, task, servers, np.ones((1, 4), bool))
    assert out.order_logit is None


def _with_order_bias(bias: float) -> ScaleNet:
    """A trained-like network whose ordering head answers ``bias`` (its last layer zeroed)."""
    net = trained_like(3, ordering_head=True)
    assert net.order_head is not None
    with torch.no_grad():
        net.order_head[2].weight.zero_()
        net.order_head[2].bias.fill_(bias)
    return net


@pytest.mark.parametrize("fast", [True, False])
def test_a_positive_logit_admits_in_workflow_order_a_negative_one_in_the_calls(
    fast: bool,
) -> None:
    """Both orders are times on one clock (a call's own order as no priority would queue
    it behind every prioritised call for good)."""
    decisions = real_decisions(16, 12)
    own = NetworkScheduler(_with_order_bias(-1.0), greedy=True, fast=fast)
    ordered = NetworkScheduler(_with_order_bias(1.0), greedy=True, fast=fast)
    bare = copy.deepcopy(_with_order_bias(1.0))
    bare.order_head = None  # the same placement weights, no head
    without = NetworkScheduler(bare, greedy=True, fast=fast)
    assert any(d.task.workflow_age > 0 for d in decisions)
    for d in decisions:
        plain = without.select(d)
        assert type(plain) is int  # no head: a plain placement
        mine, theirs = own.select(d), ordered.select(d)
        assert isinstance(mine, Place) and isinstance(theirs, Place)
        assert mine.server == theirs.server == plain  # the head orders; it never places
        assert mine.priority == d.now
        assert theirs.priority == workflow_order(d) == d.now - d.task.workflow_age


def test_batched_answers_carry_the_same_orders() -> None:
    assert_batched_answers_as_one_at_a_time(_with_order_bias(1.0), 10)


def test_the_head_reads_the_placement_detached() -> None:
    """Its loss reaches its own weights only: learning the order cannot move placement."""
    net = build_network("scale", TASK_FEATURES, BASE_SERVER_FEATURES, ordering_head=True)
    assert isinstance(net, ScaleNet)
    rng = np.random.default_rng(1)
    out = net(
        torch.as_tensor(rng.normal(size=(2, TASK_FEATURES)), dtype=torch.float32),
        torch.as_tensor(rng.normal(size=(2, 5, BASE_SERVER_FEATURES)), dtype=torch.float32),
        torch.ones(2, 5, dtype=torch.bool),
        torch.tensor([5, 5]),
        need_value=False,
    )
    assert out.order_logit is not None
    out.order_logit.sum().backward()
    moved = {name for name, p in net.named_parameters() if p.grad is not None}
    assert moved and all(name.startswith("order_head.") for name in moved)
