"""SCALE's critic options: a detached or own critic leaves the actor to the policy loss."""

from __future__ import annotations

import pytest
import torch

from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
from scalesched.nn import build_network
from scalesched.nn.scale_net import ScaleNet, ScaleNetConfig

torch.set_num_threads(1)


def _net(critic_encoder: str) -> ScaleNet:
    torch.manual_seed(3)
    net = build_network(
        "scale",
        task_dim=TASK_FEATURES,
        server_dim=SERVER_FEATURES,
        heuristic_prior=5.0,
        critic_encoder=critic_encoder,
    )
    assert isinstance(net, ScaleNet)
    return net


def _batch(n_max: int = 6) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    task = torch.randn(4, TASK_FEATURES, generator=g)
    servers = torch.randn(4, n_max, SERVER_FEATURES, generator=g)
    n = torch.tensor([6, 5, 3, 6])
    mask = torch.arange(n_max)[None, :] < n[:, None]
    mask[1, 0] = False
    return task, servers, mask, n


def _actor_grad_norm(net: ScaleNet) -> float:
    critic = {id(p) for p in net.critic_parameters()} | {id(p) for p in net.critic.parameters()}
    return sum(
        float(p.grad.square().sum())
        for p in net.parameters()
        if id(p) not in critic and p.grad is not None
    )


@pytest.mark.parametrize("kind", ["shared", "detached", "own"])
def test_the_actor_is_the_same_network_whatever_the_critic(kind: str) -> None:
    batch = _batch()
    assert torch.equal(_net(kind)(*batch).logits, _net("shared")(*batch).logits)


@pytest.mark.parametrize(
    ("kind", "moves_actor"), [("shared", True), ("detached", False), ("own", False)]
)
def test_only_a_shared_critic_trains_the_actor_through_the_value_loss(
    kind: str, moves_actor: bool
) -> None:
    net = _net(kind)
    net(*_batch()).value.square().sum().backward()
    assert (_actor_grad_norm(net) > 0) == moves_actor
    assert all(p.grad is not None for p in net.critic.parameters())


def test_the_own_critic_sees_the_cluster_not_the_padding() -> None:
    net = _net("own")
    task, servers, mask, n = _batch()
    junk = servers.clone()
    junk[2, 3:] = 1e6  # beyond n = 3: padding
    assert torch.allclose(net(task, servers, mask, n).value, net(task, junk, mask, n).value)
    changed = servers.clone()
    changed[2, 0] += 1.0
    assert not torch.allclose(net(task, servers, mask, n).value, net(task, changed, mask, n).value)


def test_critic_parameters_are_disjoint_from_the_actor_unless_shared() -> None:
    assert _net("shared").critic_parameters() == []
    own = _net("own")
    names = {n for n, p in own.named_parameters() if any(p is q for q in own.critic_parameters())}
    assert names and all(n.startswith("critic") for n in names)
    with pytest.raises(ValueError, match="critic_encoder"):
        ScaleNetConfig(task_dim=3, server_dim=3, critic_encoder="twin")
