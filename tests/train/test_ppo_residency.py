"""The world training runs in: a new config trains on planned deployments, every shipped
config says ``residency: dynamic`` (what the shipped policies were trained in), and a
checkpoint records its world."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalesched.errors import InputError, parse_yaml
from scalesched.nn.checkpoint import load_checkpoint
from scalesched.train import dagger
from scalesched.train.config_file import algorithm_of
from scalesched.train.ppo import Trainer, load_config, validation_response_times

PRESETS = sorted((Path(__file__).parents[2] / "configs" / "train").glob("*.yaml"))

TINY = dict(
    total_steps=64,
    num_envs=1,
    num_steps=64,
    workflows=3,
    cluster="hetero-8",
    validate_every=0,
    validation_sizes=[],
    checkpoint_every=1,
)


def test_a_new_config_trains_in_the_planned_world_and_the_field_is_checked() -> None:
    assert load_config(None).residency == "planned"
    assert load_config(None).env_config().residency == "planned"
    assert dagger.DaggerConfig().residency == "planned"
    with pytest.raises(InputError, match="residency"):
        load_config(None, residency="static")
    with pytest.raises(InputError, match="residency"):
        dagger.load_config(None, residency="static")


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_every_shipped_config_names_the_dynamic_world(path: Path) -> None:
    assert parse_yaml(path.read_text(), str(path))["residency"] == "dynamic"
    loader = dagger.load_config if algorithm_of(path) == "dagger" else load_config
    assert loader(path).residency == "dynamic"


def test_a_checkpoint_records_its_world_and_resuming_in_another_is_refused(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    Trainer(load_config(None, **TINY), out).train()
    saved = load_checkpoint(out / "last.pt")
    assert saved["config"]["residency"] == "planned"
    assert saved["metadata"]["residency"] == "planned"
    more = {**TINY, "total_steps": 2 * 64, "residency": "dynamic"}
    with pytest.raises(InputError, match="config.residency"):
        Trainer(load_config(None, **more), out, resume=True)


def test_validation_runs_in_the_configs_world() -> None:
    """The same policy validated in the two worlds of hetero-8 at load 0.7: the planned
    world offers about three times the rate, so eft's mean response differs."""
    from scalesched.policies import get_policy

    base = dict(validation_workflows=60, validation_warmup=0, validation_seeds=[1000])
    times = {}
    for residency in ("planned", "dynamic"):
        cfg = load_config(None, **base, residency=residency, validation_baselines=["eft"])
        ours, theirs = validation_response_times(cfg, get_policy("eft"), 8)
        assert ours == theirs["eft"]  # the same policy on the same jobs and tables
        times[residency] = ours
    assert times["planned"] != times["dynamic"]
