"""The numpy acting path equals the PyTorch network: logits, draws, greedy choices, runs."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import BASE_SERVER_FEATURES, TASK_FEATURES, Decision
from scalesched.nn import MASKED_LOGIT, ScaleNet, build_network
from scalesched.nn.fast import FastScaleActor
from scalesched.nn.scheduler import (
    BatchedNetworkScheduler,
    NetworkScheduler,
    RaceClocks,
    exponential_race,
    load_scheduler,
)
from scalesched.policies import get_policy
from scalesched.policies.trained import shipped_policies
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate
from scalesched.sim.scenario import Scenario, build_jobs

torch.set_num_threads(1)

VARIANTS: list[dict[str, Any]] = [
    {},
    {"scalable_softmax": True},
    {"heuristic_prior": 5.0},
    {"server_self_attention": True, "scalable_softmax": True, "heuristic_prior": 2.0},
]


def trained_like(seed: int, **cfg: Any) -> ScaleNet:
    """A network with weights far from the near-uniform initialisation (as after training)."""
    torch.manual_seed(seed)
    net = build_network("scale", TASK_FEATURES, BASE_SERVER_FEATURES, **cfg)
    assert isinstance(net, ScaleNet)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return net.eval()


def torch_logits(net: ScaleNet, task: np.ndarray, servers: np.ndarray, mask: np.ndarray) -> Any:
    batch, n = mask.shape
    with torch.inference_mode():
        out = net(
            torch.as_tensor(task, dtype=torch.float32),
            torch.as_tensor(servers, dtype=torch.float32),
            torch.as_tensor(mask),
            torch.full((batch,), n),
            need_value=False,
        )
    return out.logits.numpy()


def assert_same_logits(want: np.ndarray, got: np.ndarray, mask: np.ndarray) -> None:
    assert got.dtype == np.float32 and got.shape == want.shape
    # float32 rounding of two summation orders: about 1e-6 of the logits' scale, up to
    # 1.4e-5 through server self-attention at N = 48 on an AMD EPYC (its BLAS kernels sum
    # in another order); a wrong input or weight moves logits by whole units
    scale = float(np.abs(want[mask]).max())
    atol = 5e-5 * max(scale, 1.0)
    np.testing.assert_allclose(got[mask], want[mask], rtol=0, atol=atol)
    assert (got[~mask] == MASKED_LOGIT).all()
    # Greedy picks agree up to exact ties: identical servers have equal logits, and
    # rounding may break such a tie either way.
    picked = np.take_along_axis(want, got.argmax(axis=-1)[..., None], axis=-1)[..., 0]
    assert (picked >= want.max(axis=-1) - 2 * atol).all()


@pytest.mark.parametrize("cfg", VARIANTS, ids=lambda c: ",".join(c) or "paper")
@pytest.mark.parametrize("n", [1, 7, 48])
def test_actor_logits_equal_the_network(cfg: dict[str, Any], n: int) -> None:
    net = trained_like(0, **cfg)
    rng = np.random.default_rng(n)
    batch = 4
    task = rng.normal(size=(batch, TASK_FEATURES))
    servers = rng.normal(size=(batch, n, BASE_SERVER_FEATURES))
    mask = rng.random((batch, n)) < 0.7
    mask[:, 0] = True
    actor = FastScaleActor(net)
    want = torch_logits(net, task, servers, mask)
    assert_same_logits(want, actor.logits_batch(task, servers, mask), mask)
    assert_same_logits(want[1], actor.logits(task[1], servers[1], mask[1]), mask[1])


def test_actor_rejects_a_wrong_width() -> None:
    actor = FastScaleActor(trained_like(0))
    with pytest.raises(ValueError, match="expected task"):
        actor.logits(
            np.zeros(TASK_FEATURES), np.zeros((3, BASE_SERVER_FEATURES - 1)), np.ones(3, bool)
        )


def real_decisions(n: int, count: int) -> list[Decision]:
    """Decisions met while eft runs a small workload (their feature arrays copied)."""
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=12, rate=0.13 * n, seed=3))
    sim = Simulation(spec, jobs, tables=tables)
    eft = get_policy("eft")
    out = []
    d = sim.next_decision()
    while d is not None and len(out) < count:
        d.server_features  # built now, on this state  # noqa: B018
        out.append(d)
        sim.apply(eft.select(d))
        d = sim.next_decision()
    return out


@pytest.mark.parametrize("name", ["scale", "scale-ssm"])
def test_shipped_policies_act_the_same_on_real_decisions(name: str) -> None:
    scheduler = load_scheduler(shipped_policies()[name], greedy=True)
    reference = NetworkScheduler(scheduler.network, greedy=True, fast=False)
    assert scheduler.actor is not None and reference.actor is None
    for d in real_decisions(16, 60):
        want = reference.forward(d).logits[0].numpy()
        # a shipped network reads the first 18 server features (the cache ones follow)
        servers = d.server_features[:, : scheduler.server_dim]
        got = scheduler.actor.logits(d.task_features, servers, d.mask)
        assert_same_logits(want, got, d.mask)
        ours, theirs = scheduler.select(d), reference.select(d)
        tie = 1e-5 * float(np.abs(want[d.mask]).max())  # identical servers: equal logits
        assert ours == theirs or abs(want[int(ours)] - want[int(theirs)]) <= tie


def test_exponential_race_draws_what_torch_multinomial_draws() -> None:
    """With fresh buffers and with buffers reused across decisions and sizes (and a deep
    copy of them, which starts afresh)."""
    rng = np.random.default_rng(0)
    ours, theirs = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    clocks = RaceClocks()
    for k in range(2000):
        n = int(rng.integers(1, 300))
        logits = (rng.normal(size=n) * rng.choice([0.1, 3.0, 30.0])).astype(np.float32)
        logits[rng.random(n) < 0.3] = MASKED_LOGIT
        logits[rng.integers(n)] = 1.0
        probs = torch.softmax(torch.as_tensor(logits).double(), dim=-1)
        want = int(torch.multinomial(probs, 1, generator=theirs).item())
        reused = clocks if k % 3 else copy.deepcopy(clocks) if k % 2 else None
        assert exponential_race(logits, ours, reused) == want


@pytest.mark.parametrize("greedy", [False, True])
def test_a_run_is_identical_through_either_path(greedy: bool) -> None:
    net = load_scheduler(shipped_policies()["scale"]).network
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=25, rate=2.0, seed=11))
    runs = [
        simulate(
            spec,
            jobs,
            NetworkScheduler(net, greedy=greedy, fast=fast),
            seed=5,
            tables=tables,
            record_trace=True,
        )
        for fast in (False, True)
    ]
    assert [r.server for r in runs[0].trace] == [r.server for r in runs[1].trace]
    assert runs[0].metrics["avg_response_time_s"] == runs[1].metrics["avg_response_time_s"]


def assert_batched_answers_as_one_at_a_time(net: ScaleNet, count: int) -> None:
    """The batched scheduler's answers on ``count`` real decisions equal one-at-a-time's."""
    decisions = real_decisions(16, count)
    one, batched = NetworkScheduler(net), BatchedNetworkScheduler(net)
    one.reset(4)
    batched.reset(4)
    assert batched.select_batch(decisions) == [one.select(d) for d in decisions]


def test_batched_scoring_answers_as_one_at_a_time_on_the_same_state() -> None:
    assert_batched_answers_as_one_at_a_time(trained_like(1, heuristic_prior=1.0), 30)


def test_batched_scheduler_runs_through_the_simulator() -> None:
    net = load_scheduler(shipped_policies()["scale"]).network
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=15, rate=2.0, seed=2))
    result = simulate(spec, jobs, BatchedNetworkScheduler(net), seed=0, tables=tables)
    assert result.metrics["workflows_completed"] == 15


def test_the_torch_path_is_kept_where_the_actor_cannot_serve() -> None:
    mlp = build_network("mlp16", TASK_FEATURES, BASE_SERVER_FEATURES)
    assert NetworkScheduler(mlp).actor is None
    assert load_scheduler(shipped_policies()["scale"]).actor is not None


def test_recording_switched_on_after_construction_records() -> None:
    # research/srr_sweep.py once set the flag on a built scheduler, and the numpy actor
    # kept acting without recording: every drift figure of the sweep came back empty.
    scheduler = load_scheduler(shipped_policies()["scale"])
    scheduler.record_features = True
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=5, rate=2.0, seed=3))
    simulate(spec, jobs, scheduler, seed=0, tables=tables)
    assert 16 in scheduler.feature_stats()


@pytest.mark.parametrize("batched", [False, True])
def test_the_numpy_path_records_the_networks_attention_feature(batched: bool) -> None:
    """Recording (an evaluation's feature statistics) keeps the numpy path, and what it
    records is the PyTorch network's ``attn_feature`` up to float32 rounding."""
    net = load_scheduler(shipped_policies()["scale"]).network
    kind = BatchedNetworkScheduler if batched else NetworkScheduler
    fast, reference = kind(net, record_features=True), NetworkScheduler(net, fast=False)
    assert fast.actor is not None
    decisions = real_decisions(16, 40)
    if batched:
        fast.select_batch(decisions[:20])
        fast.select_batch(decisions[20:])
    else:
        for d in decisions:
            fast.select(d)
    got = fast.features[16]
    assert len(got) == len(decisions)
    for d, feature in zip(decisions, got, strict=True):
        want = reference.forward(d).attn_feature[0].numpy()
        np.testing.assert_allclose(feature, want, rtol=1e-4, atol=1e-4)
