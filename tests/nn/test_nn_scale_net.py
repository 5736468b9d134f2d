"""ScaleNet: size-agnostic, permutation-equivariant, padding-proof, masked correctly."""

from __future__ import annotations

import math

import pytest
import torch

from scalesched.nn import (
    MASKED_LOGIT,
    ScaleNet,
    ScaleNetConfig,
    SrrConfig,
    build_network,
    count_parameters,
    srr_losses,
)

torch.set_num_threads(1)

TASK_DIM, SERVER_DIM = 12, 16

VARIANTS = [
    pytest.param({}, id="plain"),
    pytest.param({"server_self_attention": True}, id="self_attn"),
    pytest.param({"scalable_softmax": True}, id="ssmax"),
    pytest.param({"server_self_attention": True, "scalable_softmax": True}, id="both"),
]


def make_net(seed: int = 0, **kw: bool) -> ScaleNet:
    torch.manual_seed(seed)
    net = ScaleNet(ScaleNetConfig(task_dim=TASK_DIM, server_dim=SERVER_DIM, **kw))
    with torch.no_grad():  # init gain 0.01 makes logits ~1e-2; scale up so checks are sharp
        net.pointer_query.weight.mul_(100.0)
    return net.eval()


def make_obs(
    ns: list[int], width: int | None = None, seed: int = 0, garbage: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random observation; real servers random, ~70% feasible (>= 1 per row)."""
    g = torch.Generator().manual_seed(seed)
    width = width or max(ns)
    batch = len(ns)
    task = torch.randn(batch, TASK_DIM, generator=g)
    servers = torch.randn(batch, width, SERVER_DIM, generator=g)
    n_servers = torch.tensor(ns, dtype=torch.long)
    real = torch.arange(width)[None, :] < n_servers[:, None]
    mask = (torch.rand(batch, width, generator=g) < 0.7) & real
    mask[:, 0] = True  # at least one feasible server per row
    if garbage:
        junk = torch.randn(batch, width, SERVER_DIM, generator=g) * 1e6
        junk[:, ::3] = float("nan")
        junk[:, 1::3] = float("inf")
        servers = torch.where(real[..., None], servers, junk)
    else:
        servers = servers * real[..., None]
    return task, servers, mask, n_servers


@pytest.mark.parametrize("kw", VARIANTS)
def test_permuting_real_servers_permutes_logits(kw: dict[str, bool]) -> None:
    net = make_net(**kw)
    ns = [5, 20, 12]
    task, servers, mask, n = make_obs(ns, width=24, seed=1)
    perm = torch.arange(24).repeat(len(ns), 1)
    g = torch.Generator().manual_seed(2)
    for row, k in enumerate(ns):
        perm[row, :k] = torch.randperm(k, generator=g)
    rows = torch.arange(len(ns))[:, None]
    with torch.no_grad():
        base = net(task, servers, mask, n)
        moved = net(task, servers[rows, perm], mask[rows, perm], n)
    torch.testing.assert_close(moved.logits, base.logits[rows, perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(moved.value, base.value, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(moved.attn_feature, base.attn_feature, atol=1e-5, rtol=1e-5)


def test_parameter_count_does_not_depend_on_n() -> None:
    net = make_net(server_self_attention=True, scalable_softmax=True)
    before = count_parameters(net)
    shapes = {name: p.shape for name, p in net.named_parameters()}
    with torch.no_grad():
        for width in (1, 7, 300):
            out = net(*make_obs([width]))
            assert out.logits.shape == (1, width)
    assert count_parameters(net) == before
    assert {name: p.shape for name, p in net.named_parameters()} == shapes


def test_masked_servers_get_large_negative_logit_and_are_never_sampled() -> None:
    net = make_net()
    task, servers, mask, n = make_obs([16, 9, 30], width=30, seed=3)
    with torch.no_grad():
        logits = net(task, servers, mask, n).logits
    assert torch.all(logits[~mask] == MASKED_LOGIT)
    assert torch.all(logits[mask] > MASKED_LOGIT / 2)
    assert torch.isfinite(torch.log_softmax(logits, dim=-1)).all()
    dist = torch.distributions.Categorical(logits=logits)
    assert torch.isfinite(dist.entropy()).all()
    torch.manual_seed(0)
    picks = dist.sample((10_000,))  # (10000, B)
    assert mask.gather(1, picks.T).all()

    # Attention still covers infeasible *real* servers (cluster state), never padding.
    weights = net.encode(task, servers, mask, n)[3]  # (B, H, N)
    real = torch.arange(30)[None, :] < n[:, None]
    assert (~mask & real).any()
    assert torch.all(weights.permute(0, 2, 1)[~mask & real] > 0)
    assert torch.all(weights.permute(0, 2, 1)[~real] == 0)


@pytest.mark.parametrize("kw", VARIANTS)
def test_mixed_sizes_in_one_batch_and_padding_content_is_ignored(kw: dict[str, bool]) -> None:
    net = make_net(**kw)
    ns = [1, 16, 48, 1024]
    task, servers, mask, n = make_obs(ns, width=1024, seed=4, garbage=True)
    with torch.no_grad():
        out = net(task, servers, mask, n)
        assert torch.isfinite(out.logits).all() and torch.isfinite(out.value).all()
        assert out.logits.shape == (4, 1024) and out.value.shape == (4,)
        assert out.attn_feature.shape == (4, net.cfg.d_model)
        for row, k in enumerate(ns):
            alone = net(
                task[row : row + 1],
                servers[row : row + 1, :k],
                mask[row : row + 1, :k],
                n[row : row + 1],
            )
            torch.testing.assert_close(out.logits[row, :k], alone.logits[0], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(out.value[row], alone.value[0], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(
                out.attn_feature[row], alone.attn_feature[0], atol=1e-5, rtol=1e-4
            )


def test_scalable_softmax_scale_is_a_learned_parameter() -> None:
    net = make_net(scalable_softmax=True)
    assert net.softmax_scale is not None
    params = dict(net.named_parameters())
    assert "softmax_scale" in params and params["softmax_scale"].requires_grad
    torch.testing.assert_close(net.softmax_scale * math.log(16), torch.ones(net.cfg.n_heads))
    out = net(*make_obs([40, 40, 7], seed=5))
    (out.attn_feature.square().sum() + out.value.sum()).backward()
    assert net.softmax_scale.grad is not None and net.softmax_scale.grad.abs().sum() > 0
    assert make_net().softmax_scale is None


def test_scalable_softmax_scales_attention_logits_by_s_log_n() -> None:
    plain = make_net()
    ssmax = make_net(scalable_softmax=True)
    ssmax.load_state_dict(plain.state_dict(), strict=False)  # only softmax_scale differs

    # At the reference size n = 16, s * log(16) = 1: identical to plain softmax.
    obs16 = make_obs([16, 16], seed=6)
    with torch.no_grad():
        a, b = plain(*obs16), ssmax(*obs16)
    torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(a.value, b.value, atol=1e-5, rtol=1e-4)

    # At n = 1024 the log-odds between any two servers are multiplied by s * log(1024) = 2.5,
    # so attention is sharper (lower entropy) than plain softmax, which flattens with n.
    obs = make_obs([1024], seed=7)
    with torch.no_grad():
        w_plain = plain.encode(*obs)[3].log()  # (1, H, N)
        w_ssmax = ssmax.encode(*obs)[3].log()
    factor = math.log(1024) / math.log(16)
    torch.testing.assert_close(
        w_ssmax - w_ssmax[..., :1], factor * (w_plain - w_plain[..., :1]), atol=1e-4, rtol=1e-4
    )
    entropy_plain = -(w_plain.exp() * w_plain).sum(-1)
    entropy_ssmax = -(w_ssmax.exp() * w_ssmax).sum(-1)
    assert torch.all(entropy_ssmax < entropy_plain)


def test_srr_gradient_flows_into_encoders() -> None:
    net = make_net(server_self_attention=True).train()
    out = net(*make_obs([16] * 32 + [48] * 32, seed=8))
    srr_losses(out.attn_feature, SrrConfig()).total.backward()
    for module in (net.task_encoder, net.server_encoder, net.query, net.key, net.attn_out):
        grads = [p.grad for p in module.parameters()]
        assert all(g is not None for g in grads)
        assert sum(float(g.abs().sum()) for g in grads if g is not None) > 0
    # The heads do not produce the attention feature, so SRR leaves them alone.
    assert all(p.grad is None for p in net.critic.parameters())


def test_build_network_and_config_validation() -> None:
    net = build_network("scale", TASK_DIM, SERVER_DIM, d_model=32, n_heads=2)
    assert isinstance(net, ScaleNet) and net.cfg.d_model == 32
    with pytest.raises(ValueError, match="unknown network kind"):
        build_network("transformer", TASK_DIM, SERVER_DIM)
    with pytest.raises(ValueError, match="multiple of n_heads"):
        ScaleNetConfig(task_dim=TASK_DIM, server_dim=SERVER_DIM, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="mask"):
        make_net()(*make_obs([4])[:2], torch.ones(1, 5, dtype=torch.bool), torch.tensor([4]))
