from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scalesched.nn.scheduler import NetworkScheduler
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.train.dagger import (
    DaggerConfig,
    Dataset,
    Labeller,
    base_of,
    fit,
    load_student,
    train,
)

torch.set_num_threads(1)

SMALL = Scenario(workload="agentic-mix", workflows=30, load=0.7, seed=100_123)


def tiny(out: Path, workflows: int = 25, **fields: object) -> DaggerConfig:
    """A run small enough for a test: one episode per iteration, one short validation."""
    base: dict[str, object] = dict(
        expert="tail",
        workflows=workflows,
        iterations=1,
        episodes=1,
        epochs=1,
        load=0.7,
        validation_seeds=[1000],
        validation_workflows=workflows,
        out=str(out),
    )
    return DaggerConfig(**{**base, **fields})  # type: ignore[arg-type]


def _labelled(beta: float, seed: int = 5) -> tuple[Dataset, Labeller, float]:
    net, _ = load_student("scale")
    data = Dataset()
    labeller = Labeller(NetworkScheduler(net, name="s"), get_policy("tail"), beta, data, seed)
    result = run(prepare("hetero-16", SMALL), labeller, warmup=0, cooldown=0)
    return data, labeller, float(result.metrics["avg_response_time_s"])


def test_labeller_with_beta_one_is_the_expert_and_labels_every_placement() -> None:
    data, labeller, mean = _labelled(beta=1.0)
    alone = run(prepare("hetero-16", SMALL), "tail", warmup=0, cooldown=0)
    assert mean == alone.metrics["avg_response_time_s"]
    assert len(data) == labeller.labelled > 0
    assert labeller.expert_acted == labeller.labelled  # tail only ever places


def test_labeller_with_beta_zero_lets_the_student_act() -> None:
    _, labeller, mean = _labelled(beta=0.0)
    assert labeller.expert_acted == 0
    assert (
        mean
        != run(prepare("hetero-16", SMALL), "tail", warmup=0, cooldown=0).metrics[
            "avg_response_time_s"
        ]
    )


def test_fit_moves_the_network_towards_the_labels() -> None:
    data, _, _ = _labelled(beta=1.0)
    net, _ = load_student("scale")
    cfg = DaggerConfig(expert="tail", epochs=6, minibatch=64, lr=3e-3)
    inputs, targets = data.tensors()
    with torch.no_grad():
        picks = net(*inputs, need_value=False).logits.argmax(1)
        before = (targets.gather(1, picks[:, None]) > 0).float().mean()
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    after = fit(net, data, cfg, optimizer, torch.Generator().manual_seed(0))["accuracy"]
    assert after > float(before) + 0.05


def test_train_writes_loadable_checkpoints_and_repeats_itself(tmp_path: Path) -> None:
    def once(out: Path) -> str:
        cfg = tiny(out, iterations=2)
        rows = train(cfg)
        assert [r["iteration"] for r in rows] == [0.0, 1.0]
        assert rows[1]["decisions"] > rows[0]["decisions"]  # aggregated, not replaced
        return (out / "dagger.csv").read_text()

    first = once(tmp_path / "a")
    assert first == once(tmp_path / "b")
    policy = get_policy(str(tmp_path / "a" / "best.pt"))
    assert policy.supports(16)


def test_base_of_names_the_searched_heuristic() -> None:
    assert base_of("rollout_oracle") == "tail"
    assert base_of("eft") == "eft"


@pytest.mark.parametrize(
    "field,value",
    [
        ("iterations", 0),
        ("beta0", 1.5),
        ("minibatch", 1),
        ("validation_seeds", [3]),
        ("observed_tokens", "p50"),
    ],
)
def test_config_refuses_values_out_of_range(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        DaggerConfig(**{field: value})  # type: ignore[arg-type]


def test_targets_spread_over_servers_the_expert_ties() -> None:
    data, _, _ = _labelled(beta=1.0)
    _, targets = data.tensors()
    assert torch.allclose(targets.sum(1), torch.ones(len(targets)))
    # hetero-16 has identical servers: some placements tie, and their labels say so
    assert bool((targets.max(1).values < 1.0).any())
    assert bool((targets.max(1).values == 1.0).any())


def test_cli_trains_a_dagger_config_into_its_out_and_refuses_ppo_only_options(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from scalesched.cli import app

    config = tmp_path / "d.yaml"
    out = tmp_path / "run"
    config.write_text(
        "algorithm: dagger\nexpert: tail\nworkflows: 20\niterations: 1\nepochs: 1\n"
        f"load: 0.7\nvalidation_seeds: [1000]\nvalidation_workflows: 20\nout: {out}\n"
    )
    runner = CliRunner()
    done = runner.invoke(app, ["train", "--config", str(config)])  # the config's own out
    assert done.exit_code == 0, done.output
    assert (out / "best.pt").is_file() and "best validation ratio" in done.stdout
    again = runner.invoke(app, ["train", "--config", str(config), "--out", str(out)])
    assert again.exit_code == 2 and "holds a run already" in again.output
    steps = runner.invoke(app, ["train", "--config", str(config), "--steps", "5"])
    assert steps.exit_code == 2 and "--steps" in steps.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithm: dagger\nepisodes: 0\n")
    refused = runner.invoke(app, ["train", "--config", str(bad), "--out", str(tmp_path / "x")])
    assert refused.exit_code == 2 and "episodes" in refused.output
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("algorithm: sarsa\n")
    named = runner.invoke(app, ["train", "--config", str(unknown)])
    assert named.exit_code == 2 and "algorithm" in named.output


def test_more_settings_take_turns_in_episodes_and_all_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool_heavy_capacity: None
) -> None:
    import scalesched.train.dagger as dagger

    seen: list[tuple[str, str]] = []
    arrivals: list[str] = []
    real = dagger.prepare

    def recording(cluster: str, scenario: Scenario) -> object:
        seen.append((cluster, scenario.workload))
        arrivals.append(scenario.arrivals)
        return real(cluster, scenario)

    monkeypatch.setattr(dagger, "prepare", recording)
    cfg = tiny(
        tmp_path,
        workflows=15,
        episodes=2,
        more_settings=[dagger.Setting("hetero-16", "tool-heavy", 0.7, arrivals="bursty")],
    )
    train(cfg)
    episodes, validation = seen[:2], seen[2:]
    assert episodes == [("hetero-16", "agentic-mix"), ("hetero-16", "tool-heavy")]
    # each setting's arrival process reaches its episodes and its validation runs
    assert arrivals[:2] == ["poisson", "bursty"]
    assert {(w, a) for (_, w), a in zip(seen[2:], arrivals[2:], strict=True)} == {
        ("agentic-mix", "poisson"),
        ("tool-heavy", "bursty"),
    }
    assert sorted(set(validation)) == [("hetero-16", "agentic-mix"), ("hetero-16", "tool-heavy")]


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"arrivals": "burst"}, "arrivals"),
        (
            {
                "more_settings": [
                    {
                        "cluster": "hetero-16",
                        "workload": "agentic-mix",
                        "load": 0.9,
                        "arrivals": "diurnal",
                    }
                ]
            },
            "more_settings",
        ),
    ],
)
def test_an_unknown_arrival_process_is_refused_naming_its_field(
    tmp_path: Path, fields: dict[str, object], where: str
) -> None:
    import yaml

    from scalesched.errors import InputError
    from scalesched.train.dagger import load_config

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"algorithm": "dagger", "expert": "tail", **fields}))
    with pytest.raises(InputError, match=f"{where}: unknown process"):
        load_config(path)


def test_a_student_in_the_experts_order_is_that_ordering_over_its_placement() -> None:
    """``order_by_expert``: the network places, the expert's priority orders the engines,
    exactly as ``fcfs_workflow:placement=<the network>`` acts once trained."""
    busy = Scenario(workload="agentic-mix", workflows=60, load=1.0, seed=100_123)

    def mean(in_expert_order: bool) -> float:
        net, _ = load_student("scale")
        student = Labeller(
            NetworkScheduler(net, name="s"),
            get_policy("fcfs_workflow"),
            0.0,
            None,
            0,
            in_expert_order=in_expert_order,
        )
        result = run(prepare("hetero-16", busy), student, warmup=0, cooldown=0)
        return float(result.metrics["avg_response_time_s"])

    composed = run(
        prepare("hetero-16", busy), "fcfs_workflow:placement=scale", warmup=0, cooldown=0
    )
    assert mean(in_expert_order=True) == composed.metrics["avg_response_time_s"]
    assert mean(in_expert_order=False) != composed.metrics["avg_response_time_s"]


def test_a_p90_network_is_trained_and_loaded_reading_predicted_lengths(tmp_path: Path) -> None:
    """``observed_tokens: p90``: the labels record what the network will read, the
    checkpoint says so, and loading it acts on the same decisions."""
    cfg = tiny(tmp_path, observed_tokens="p90")
    train(cfg)
    policy = get_policy(str(tmp_path / "best.pt"))
    assert isinstance(policy, NetworkScheduler) and policy.observed_tokens == "p90"
    plain = NetworkScheduler(policy.network, name="plain")
    busy = Scenario(workload="agentic-mix", workflows=60, load=1.0, seed=100_123)
    means = [
        run(prepare("hetero-16", busy), p, warmup=0, cooldown=0).metrics["avg_response_time_s"]
        for p in (policy, plain)
    ]
    assert means[0] != means[1]  # the same weights read other decisions


def test_cluster_files_beside_a_config_are_found_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scalesched.train.dagger import load_config

    (tmp_path / "mix.yaml").write_text("name: mix\nservers:\n  - type: h100-80g-x4\n    count: 2\n")
    config = tmp_path / "c.yaml"
    config.write_text(
        "algorithm: dagger\ncluster: mix.yaml\nmore_settings:\n"
        "  - {cluster: mix.yaml, workload: agentic-mix, load: 0.5}\n"
        "  - {cluster: hetero-16, workload: agentic-mix, load: 0.5}\n"
    )
    monkeypatch.chdir(tmp_path.parent)
    cfg = load_config(config)
    assert cfg.cluster == str(tmp_path / "mix.yaml")
    assert [x.cluster for x in cfg.more_settings] == [str(tmp_path / "mix.yaml"), "hetero-16"]


def test_best_expert_is_each_settings_best_heuristic_and_selection_is_held_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``expert: best`` labels each training setting with its own best heuristic, and
    ``selection_settings`` choose the checkpoint on settings never trained on, each
    measured against its own best heuristic; every setting runs in its own world."""
    import scalesched.train.dagger as dagger
    from scalesched.nn.checkpoint import load_checkpoint
    from scalesched.policies import BEST_HEURISTIC_CANDIDATES

    seen: list[tuple[str, str, str]] = []
    real = dagger.prepare

    def recording(cluster: str, scenario: Scenario) -> object:
        seen.append((cluster, scenario.workload, scenario.residency))
        return real(cluster, scenario)

    monkeypatch.setattr(dagger, "prepare", recording)
    held_out = dagger.Setting("hetero-8", "agentic-mix", 0.5, residency="dynamic")
    cfg = tiny(tmp_path, workflows=15, expert="best", expert_workflows=15,
               selection_settings=[held_out])  # fmt: skip
    train(cfg)
    payload = load_checkpoint(tmp_path / "best.pt")["metadata"]
    assert payload["experts"][0] in BEST_HEURISTIC_CANDIDATES
    assert payload["yardsticks"][0] in BEST_HEURISTIC_CANDIDATES
    # one run picks the expert, one episode on the training setting (planned) ...
    assert seen[:2] == [("hetero-16", "agentic-mix", "planned")] * 2
    # ... and validation runs only on the held-out setting, in its own world
    assert set(seen[2:]) == {("hetero-8", "agentic-mix", "dynamic")}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"expert": "best", "order_by_expert": True}, "order_by_expert"),
        (
            {"selection_settings": [
                {"cluster": "hetero-16", "workload": "agentic-mix", "load": 0.7,
                 "residency": "static"}]},
            "selection_settings",
        ),
        ({"iterations": 300, "episodes": 4}, "iterations"),
    ],
)  # fmt: skip
def test_config_refuses_inconsistent_fields_naming_them(
    fields: dict[str, object], where: str
) -> None:
    from scalesched.errors import InputError
    from scalesched.train.dagger import load_config

    with pytest.raises(InputError, match=where):
        load_config(None, set_fields=fields)


def test_labelling_on_the_compiled_loop_is_the_python_engines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A labelling episode keeps its events in C++ (``sim.compiled_loop``) and collects
    the same labels, observation for observation, as on the Python engine."""
    from scalesched.sim import compiled_loop, core
    from scalesched.sim import run as sim_run

    if not core.compiled_available():
        pytest.skip("the compiled core is not built in this install")
    went: list[bool] = []
    real = compiled_loop.run_loop
    monkeypatch.setattr(sim_run, "run_loop", lambda *a: went.append(real(*a)) or went[-1])
    collected = {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        collected[name] = _labelled(beta=0.5)
    assert went == [False, True]
    (a, _, mean_a), (b, _, mean_b) = collected["python"], collected["compiled"]
    assert mean_a == mean_b and len(a) == len(b) > 0
    for field in ("task", "servers", "mask", "target", "order"):
        assert [x.tobytes() if hasattr(x, "tobytes") else x for x in getattr(a, field)] == [
            x.tobytes() if hasattr(x, "tobytes") else x for x in getattr(b, field)
        ], field
