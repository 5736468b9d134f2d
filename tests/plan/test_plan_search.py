"""Search and placement: valid deployments, pruning, baselines."""

from __future__ import annotations

from collections import Counter

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import deployment_from_dict, deployment_to_dict
from scalesched.cluster.model import ClusterSpec
from scalesched.errors import InputError
from scalesched.plan import search
from scalesched.plan.pipeline import Curves, ReplicaConfig, predict
from scalesched.plan.profile import workload_profile
from scalesched.plan.search import Packing, candidate_configs, search_plan


@pytest.fixture(scope="module")
def mix():
    return workload_profile("agentic-mix", samples=150, seed=9)


def _check_valid(cluster: ClusterSpec, result) -> None:
    dep = deployment_from_dict(
        deployment_to_dict("t", cluster.name, result.replicas), cluster, "plan"
    )
    assert dep.gpus_used == pytest.approx(result.gpus_used)
    counts = Counter(r.model for r in result.replicas)
    assert counts == {m: sum(c.values()) for m, c in result.allocation.items() if c}


@pytest.mark.parametrize("strategy", ["plan", "independent", "uniform"])
def test_every_strategy_gives_a_valid_deployment(mix, strategy):
    cluster = get_cluster("hetero-16")
    result = search_plan(cluster, mix, 2.0, strategy=strategy)
    _check_valid(cluster, result)
    assert set(result.allocation) == set(mix.models) and all(result.allocation.values())
    total = sum(s.gpus for s in cluster.servers)
    assert 0 < result.gpus_used <= total


def test_plan_beats_baselines_on_its_own_prediction(mix):
    cluster = get_cluster("hetero-16")
    plan = search_plan(cluster, mix, 2.0)
    assert plan.prediction.throughput_wps > 2.0 and plan.prediction.mean_s < float("inf")
    for b in ("independent", "uniform"):
        base = search_plan(cluster, mix, 2.0, strategy=b)
        assert plan.prediction.mean_s <= base.prediction.mean_s


@pytest.mark.parametrize("strategy", ["independent", "uniform"])
def test_baselines_keep_to_their_split(mix, strategy):
    cluster = get_cluster("homogeneous-4:h100-80g-x8")
    total = sum(s.gpus for s in cluster.servers)
    base = search_plan(cluster, mix, 50.0, strategy=strategy)  # more than fits: budgets bind
    calls = {m: mix.calls[m].calls_per_workflow for m in mix.models}
    for m, counts in base.allocation.items():
        budget = total * (calls[m] / sum(calls.values()) if strategy == "independent" else 0.25)
        gpus = sum(c.gpus * n for c, n in counts.items())
        biggest = max(c.gpus for c in counts)
        assert gpus < budget + biggest  # stops at the first replica past its share
    plan = search_plan(cluster, mix, 50.0)
    assert plan.prediction.throughput_wps >= base.prediction.throughput_wps


def test_dominance_and_memory_pruning(mix):
    cluster = get_cluster("hetero-8")
    curves = Curves(mix)
    configs = candidate_configs("llama-2-70b", Packing(cluster), curves)
    assert configs and all(c.tp >= 2 for c in configs)  # 70b fits on no single GPU
    assert not any(c.gpu_type == "L4-24G" for c in configs)  # nor on a 4 x L4 server
    for c in configs:
        for d in configs:
            if d == c or d.gpu_type != c.gpu_type:  # dominance is within one GPU type
                continue
            a, b = curves.get("llama-2-70b", c), curves.get("llama-2-70b", d)
            assert not (
                d.gpus <= c.gpus
                and b.capacity >= a.capacity
                and b.latency[0] <= a.latency[0]
                and (d.gpus, b.capacity, b.latency[0]) != (c.gpus, a.capacity, a.latency[0])
            )


def test_placement_best_fit_and_tp_in_one_server():
    cluster = get_cluster("homogeneous-3:h100-80g-x4")
    pack = Packing(cluster)
    q = ReplicaConfig("H100-80G", 1, 0.25)
    assert pack.place("phi-2", q) and pack.place("phi-2", q)
    # best fit: the second quarter goes on the same GPU as the first
    assert pack.replicas[0].server == pack.replicas[1].server
    assert pack.replicas[0].gpus == pack.replicas[1].gpus
    t4 = ReplicaConfig("H100-80G", 4, 1.0)
    assert pack.place("llama-2-70b", t4) and pack.place("llama-2-70b", t4)
    assert not pack.place("llama-2-70b", t4)  # one server has a GPU partly used
    assert not pack.can_place("H100-80G", 4, 1.0)
    servers = {r.server for r in pack.replicas if r.model == "llama-2-70b"}
    assert len(servers) == 2  # each tp-4 group whole on its own server
    # a different configuration of a model never joins its group on a server
    assert not any(
        r.server == pack.replicas[0].server for r in pack.replicas if r.model == "llama-2-70b"
    )


def test_spread_breaks_ties():
    cluster = get_cluster("homogeneous-2:h100-80g-x4")
    c = ReplicaConfig("H100-80G", 2, 1.0)
    pack = Packing(cluster)
    assert pack.place("llama-2-7b", c) and pack.place("codellama-34b", c)
    assert pack.replicas[0].server == pack.replicas[1].server  # best fit fills server 0
    # two servers equally full, one already holding a replica: the next goes to the other
    pack = Packing(cluster)
    pack.free = [[4, 4, 0, 0], [4, 4, 0, 0]]
    assert pack.place("llama-2-7b", c)
    assert pack.place("llama-2-7b", c)
    assert [r.server for r in pack.replicas] == ["h100-80g-x4-0", "h100-80g-x4-1"]


def test_bad_input(mix):
    with pytest.raises(InputError, match="rate"):
        search_plan(get_cluster("hetero-8"), mix, 0.0)
    with pytest.raises(InputError, match="no GPU servers"):
        search_plan(get_cluster("homogeneous-2:cpu-64c"), mix, 1.0)
    with pytest.raises(InputError, match="llama-2-70b"):
        search_plan(get_cluster("homogeneous-2:l4-24g-x4"), mix, 1.0)


def test_overload_is_reported(mix):
    cluster = get_cluster("hetero-4")
    result = search_plan(cluster, mix, 1000.0)
    assert any("exceeds the predicted throughput" in n for n in result.notes)
    assert predict(Curves(mix), result.allocation, 1000.0).mean_s == float("inf")


def test_kv_starved_configurations_are_no_candidates(mix):
    """llama-2-70b on two H100s holds 9 calls at once (1.1 requests/s against 22.8 on four):
    a router's passing choice of such a replica queues calls for minutes."""
    cluster = get_cluster("hetero-8")
    curves = Curves(mix)
    configs = candidate_configs("llama-2-70b", Packing(cluster), curves)
    assert {(c.tp, c.share) for c in configs} == {(4, 1.0)}
    for model in mix.models:
        configs = candidate_configs(model, Packing(cluster), curves)
        for c in configs:
            same = [d for d in configs if d.gpu_type == c.gpu_type]
            dense = max(curves.get(model, d).capacity / d.gpus for d in same)
            assert curves.get(model, c).capacity / c.gpus >= search.STARVED * dense


def _h100_and_l4() -> tuple[ClusterSpec, ClusterSpec]:
    fast = get_cluster("homogeneous-2:h100-80g-x4")
    cheap = get_cluster("homogeneous-2:l4-24g-x4")
    return fast, ClusterSpec("h100-l4", fast.servers + cheap.servers)


def test_idle_cheap_gpus_take_the_small_model_when_the_rate_needs_it(mix):
    fast, both = _h100_and_l4()
    rate = 2.0
    alone = search_plan(fast, mix, rate)
    # the H100s alone sustain the rate, with less than the headroom the plan keeps
    assert rate < alone.prediction.throughput_wps < search.HEADROOM * rate
    plan = search_plan(both, mix, rate)
    _check_valid(both, plan)
    on_l4 = [r for r in plan.replicas if r.server.startswith("l4")]
    assert on_l4 and {r.model for r in on_l4} <= {"llama-2-7b", "phi-2"}
    assert plan.prediction.throughput_wps > alone.prediction.throughput_wps
    # where the H100s hold ample headroom, the L4s stay idle
    low = search_plan(both, mix, 0.5)
    assert not any(r.server.startswith("l4") for r in low.replicas)


def _one_search(cluster: ClusterSpec, mix, rate: float):
    """One run of the search (no restarts), as ``_plan_served`` makes each of its tries."""
    curves = Curves(mix)
    packing = Packing(cluster)
    configs = {m: candidate_configs(m, packing, curves) for m in mix.models}
    alloc: dict[str, dict[ReplicaConfig, int]] = {m: {} for m in mix.models}
    search._plan(curves, packing, configs, alloc, rate, [])
    return packing, predict(curves, alloc, rate)


def test_headroom_phase_never_raises_the_predicted_mean(mix, monkeypatch):
    _, both = _h100_and_l4()
    with_phase, with_prediction = _one_search(both, mix, 2.0)
    monkeypatch.setattr(search, "_headroom", lambda *args: 0)
    without, without_prediction = _one_search(both, mix, 2.0)
    assert len(with_phase.replicas) > len(without.replicas)
    assert with_prediction.mean_s <= without_prediction.mean_s * (1 + 1e-9)
    assert with_prediction.throughput_wps > without_prediction.throughput_wps


@pytest.mark.parametrize("rate", [0.3, 0.6])
def test_a_model_whose_only_servers_others_took_is_placed_first(mix, rate):
    """One H100 server among L4s: llama-2-70b fits only there at tp 4 (tp 2 is KV-starved),
    where the greedy search would first put smaller models. Every model still gets a
    replica: by the 70B model placed first, or by the search without starvation pruning
    (70B at tp 2 beside the 34B model) where that predicts the lower mean."""
    cluster = get_cluster("configs/clusters/edge-l4-cpu.yaml")
    result = search_plan(cluster, mix, rate)
    _check_valid(cluster, result)
    assert all(result.allocation.values()) and not result.notes
    assert result.prediction.throughput_wps > rate


def test_a_plan_sized_to_a_mean_target_stops_once_it_meets_it(mix):
    """``slo_mean_s``: the same greedy order, cut where the predicted mean first meets the
    target: fewer GPUs than the fastest plan, a prediction at or under the target; a looser
    target takes no more GPUs."""
    cluster = get_cluster("hetero-16")
    fastest = search_plan(cluster, mix, 2.0)
    target = 1.25 * fastest.prediction.mean_s
    sized = search_plan(cluster, mix, 2.0, slo_mean_s=target)
    _check_valid(cluster, sized)
    assert sized.gpus_used < fastest.gpus_used
    assert sized.prediction.mean_s <= target < fastest.prediction.mean_s * 2
    looser = search_plan(cluster, mix, 2.0, slo_mean_s=2 * target)
    assert looser.gpus_used <= sized.gpus_used
    with pytest.raises(InputError, match="slo_mean_s"):
        search_plan(cluster, mix, 2.0, slo_mean_s=0.0)


def test_a_plan_below_the_ceiling_keeps_headroom_for_every_model(mix):
    """hetero-32 at about 0.7 of its planned capacity: the latency search alone spends the
    fast GPUs on the small models and leaves the 70B model 1.18x its need with a third of
    the GPUs idle; the plan made again with every model's floor at the headroom holds it."""
    cluster = get_cluster("hetero-32")
    rate = 29.0
    result = search_plan(cluster, mix, rate)
    _check_valid(cluster, result)
    assert result.prediction.throughput_wps >= search.HEADROOM * rate
    curves = Curves(mix)
    for model, counts in result.allocation.items():
        need = rate * mix.calls[model].calls_per_workflow
        cap = sum(curves.get(model, c).capacity * n for c, n in counts.items())
        assert cap >= search.HEADROOM * need


def _placed(cluster: ClusterSpec, wanted: list[tuple[str, ReplicaConfig]]):
    packing = Packing(cluster)
    alloc: dict[str, dict[ReplicaConfig, int]] = {}
    for model, config in wanted:
        assert packing.place(model, config)
        alloc.setdefault(model, {})
        alloc[model][config] = alloc[model].get(config, 0) + 1
    return packing, alloc


def test_a_swap_moves_the_largest_model_to_the_faster_gpus(mix):
    """One H100 and one A100 server, the greedy order's mistake built by hand: the small
    models on the H100s, llama-2-70b on the A100s. The swap phase exchanges the two servers'
    replicas, which lowers the predicted mean, and leaves the packing consistent."""
    h100 = get_cluster("homogeneous-1:h100-80g-x4")
    a100 = get_cluster("homogeneous-1:a100-80g-x4")
    cluster = ClusterSpec("h100-a100", h100.servers + a100.servers)
    h, a = "H100-80G", "A100-80G"
    packing, alloc = _placed(
        cluster,
        [
            ("llama-2-7b", ReplicaConfig(h, 1, 1.0)),
            ("phi-2", ReplicaConfig(h, 1, 1.0)),
            ("codellama-34b", ReplicaConfig(h, 2, 1.0)),
            ("llama-2-70b", ReplicaConfig(a, 4, 1.0)),
        ],
    )
    curves = Curves(mix)
    rate = 0.3
    before = predict(curves, alloc, rate).mean_s
    assert search._swap_servers(curves, packing, alloc, rate) == 1
    after = predict(curves, alloc, rate).mean_s
    assert after < before
    on = {r.model: r.server for r in packing.replicas}
    assert on["llama-2-70b"] == cluster.servers[0].name
    assert {on[m] for m in ("llama-2-7b", "phi-2", "codellama-34b")} == {cluster.servers[1].name}
    assert alloc["llama-2-70b"] == {ReplicaConfig(h, 4, 1.0): 1}
    assert packing.config_on[1, "codellama-34b"] == ReplicaConfig(a, 2, 1.0)
    assert packing.free == [[0, 0, 0, 0], [0, 0, 0, 0]]
    # no further exchange lowers it: swapping back would raise the mean
    assert search._swap_servers(curves, packing, alloc, rate) == 0
    result = search.PlanResult(
        "plan", rate, predict(curves, alloc, rate), packing.replicas, alloc, 8.0, 0.0, 0
    )
    _check_valid(cluster, result)


def test_a_swap_needs_the_replicas_to_fit_their_new_gpus(mix):
    """llama-2-70b at tp 4 fills four H100s; on four L4s it does not fit, so an L4 server is
    never its swap partner, however idle."""
    fast, both = _h100_and_l4()
    packing, alloc = _placed(both, [("llama-2-70b", ReplicaConfig("H100-80G", 4, 1.0))])
    l4 = next(i for i, s in enumerate(both.servers) if s.gpu_type == "L4-24G")
    assert search._swapped(Curves(mix), packing, alloc, 0, l4) is None


@pytest.mark.parametrize("cluster,rate", [("hetero-16", 12.65), ("hetero-32", 29.0)])
def test_the_swap_phase_never_raises_the_predicted_mean(mix, monkeypatch, cluster, rate):
    monkeypatch.setattr(search, "_presets", lambda *args: [])  # one search, phase on or off
    spec = get_cluster(cluster)
    with_swaps = search_plan(spec, mix, rate)
    _check_valid(spec, with_swaps)
    monkeypatch.setattr(search, "_swap_servers", lambda *args: 0)
    without = search_plan(spec, mix, rate)
    assert with_swaps.prediction.mean_s <= without.prediction.mean_s
    assert with_swaps.gpus_used == pytest.approx(without.gpus_used)


def test_a_preset_is_placed_before_the_search(mix):
    """A restart's preset replicas are the plan's first; the search then fills the rest."""
    cluster = get_cluster("hetero-16")
    curves = Curves(mix)
    packing = Packing(cluster)
    configs = {m: candidate_configs(m, packing, curves) for m in mix.models}
    alloc: dict[str, dict[ReplicaConfig, int]] = {m: {} for m in mix.models}
    h100_tp4 = ReplicaConfig("H100-80G", 4, 1.0)
    search._plan(curves, packing, configs, alloc, 14.0, [], preset=("llama-2-70b", h100_tp4, 3))
    assert [r.model for r in packing.replicas[:3]] == ["llama-2-70b"] * 3
    assert all(alloc.values())
    gpus = sum(r.tp * r.share for r in packing.replicas)
    result = search.PlanResult(
        "plan", 14.0, predict(curves, alloc, 14.0), packing.replicas, alloc, gpus, 0.0, 0
    )
    _check_valid(cluster, result)


def test_presets_are_each_models_fastest_configuration_at_fractions_of_its_need(mix):
    curves = Curves(mix)
    packing = Packing(get_cluster("hetero-16"))
    configs = {m: candidate_configs(m, packing, curves) for m in mix.models}
    presets = search._presets(curves, configs, 14.0)
    assert {floor for floor, _ in presets} == {1.0, search.HEADROOM}
    for model, options in configs.items():
        counts = sorted(k for floor, (m, _, k) in presets if m == model and floor == 1.0)
        assert counts == sorted(set(counts)) and counts[0] >= 1
        fastest = min(curves.get(model, c).latency[0] for c in options)
        assert all(
            curves.get(model, c).latency[0] == fastest for _, (m, c, _) in presets if m == model
        )
    h100_tp4 = ReplicaConfig("H100-80G", 4, 1.0)
    need = 14.0 * mix.calls["llama-2-70b"].calls_per_workflow
    alone = -(-need // curves.get("llama-2-70b", h100_tp4).capacity)
    assert (1.0, ("llama-2-70b", h100_tp4, alone)) in presets


@pytest.mark.parametrize("cluster,rate", [("hetero-16", 14.13), ("hetero-32", 29.0)])
def test_restarts_lower_the_predicted_mean_where_the_greedy_order_misses(
    monkeypatch, cluster, rate
):
    """The profile ``scalesched plan`` uses, near 0.7 of the planned capacity of hetero-16
    and -32: the greedy order alone gives the fast GPUs to the small models first; a
    restart with a large model on the H100 servers first predicts a mean at least 5%
    lower, and the plan still holds the headroom."""
    mix = workload_profile("agentic-mix")
    spec = get_cluster(cluster)
    restarted = search_plan(spec, mix, rate)
    _check_valid(spec, restarted)
    monkeypatch.setattr(search, "_presets", lambda *args: [])
    single = search_plan(spec, mix, rate)
    assert restarted.prediction.mean_s < 0.95 * single.prediction.mean_s
    assert restarted.prediction.throughput_wps >= search.HEADROOM * rate
