"""Mlp16Net: the fixed-size baseline works at N = 16 and refuses anything else."""

from __future__ import annotations

import pytest
import torch

from scalesched.nn import MASKED_LOGIT, Mlp16Net, build_network, count_parameters

torch.set_num_threads(1)

TASK_DIM, SERVER_DIM = 12, 16


def make_obs(ns: list[int], width: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    batch = len(ns)
    n = torch.tensor(ns)
    real = torch.arange(width)[None, :] < n[:, None]
    mask = (torch.rand(batch, width, generator=g) < 0.6) & real
    mask[:, 0] = True
    servers = torch.randn(batch, width, SERVER_DIM, generator=g) * real[..., None]
    return torch.randn(batch, TASK_DIM, generator=g), servers, mask, n


def test_forward_at_16_with_extra_padding_columns() -> None:
    torch.manual_seed(0)
    net = build_network("mlp16", TASK_DIM, SERVER_DIM)
    assert isinstance(net, Mlp16Net)
    task, servers, mask, n = make_obs([16, 16, 16], width=20)
    with torch.no_grad():
        wide = net(task, servers, mask, n)
        exact = net(task, servers[:, :16], mask[:, :16], n)
    assert wide.logits.shape == (3, 20) and wide.value.shape == (3,)
    assert wide.attn_feature.shape == (3, 256)
    assert torch.all(wide.logits[:, 16:] == MASKED_LOGIT)
    assert torch.all(wide.logits[~mask] == MASKED_LOGIT)
    torch.testing.assert_close(wide.logits[:, :16], exact.logits)
    torch.testing.assert_close(wide.value, exact.value)
    picks = torch.distributions.Categorical(logits=wide.logits).sample((10_000,))
    assert mask.gather(1, picks.T).all()


@pytest.mark.parametrize(("ns", "bad"), [([15], 15), ([17], 17), ([16, 12, 16], 12)])
def test_rejects_other_cluster_sizes(ns: list[int], bad: int) -> None:
    net = Mlp16Net(TASK_DIM, SERVER_DIM)
    with pytest.raises(ValueError, match=f"mlp-16 policy accepts exactly 16 servers, got {bad}"):
        net(*make_obs(ns, width=max(ns)))


def test_constructor_rejects_other_sizes_and_count_is_fixed() -> None:
    with pytest.raises(ValueError, match="got 48"):
        build_network("mlp16", TASK_DIM, SERVER_DIM, n_servers=48)
    hidden = 256
    in_dim = TASK_DIM + 16 * (SERVER_DIM + 1)
    expected = in_dim * hidden + hidden + hidden * hidden + hidden + hidden * 17 + 17
    assert count_parameters(Mlp16Net(TASK_DIM, SERVER_DIM)) == expected


def test_the_eft_prior_steers_an_untrained_mlp16_to_the_lowest_finish() -> None:
    """With heuristic_prior the untrained MLP is a soft eft, as ScaleNet is (one parameter)."""
    from scalesched.decision.features import RELATIVE_FINISH_FEATURE, SERVER_FEATURES
    from scalesched.train.ppo import load_config

    torch.manual_seed(0)
    plain = build_network("mlp16", TASK_DIM, SERVER_FEATURES)
    prior = build_network("mlp16", TASK_DIM, SERVER_FEATURES, heuristic_prior=20.0)
    assert count_parameters(prior) == count_parameters(plain) + 1
    g = torch.Generator().manual_seed(1)
    servers = torch.randn(64, 16, SERVER_FEATURES, generator=g)
    finish = torch.rand(64, 16, generator=g)  # relative finish: 0 at eft's pick, larger worse
    finish -= finish.min(dim=1, keepdim=True).values
    servers[..., RELATIVE_FINISH_FEATURE] = finish
    task, mask, n = (
        torch.randn(64, TASK_DIM, generator=g),
        torch.ones(64, 16, dtype=torch.bool),
        torch.full((64,), 16),
    )
    with torch.no_grad():
        pick = {
            k: net(task, servers, mask, n).logits.argmax(1)
            for k, net in (("plain", plain), ("prior", prior))
        }
    eft = finish.argmin(1)
    assert bool((pick["prior"] == eft).all())
    assert int((pick["plain"] == eft).sum()) < 32
    with pytest.raises(ValueError, match="heuristic_prior"):
        Mlp16Net(TASK_DIM, SERVER_FEATURES, heuristic_prior=-1.0)
    cfg = load_config(None, network="mlp16", heuristic_prior=5.0)
    assert cfg.network_config()["heuristic_prior"] == 5.0
