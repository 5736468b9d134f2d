"""Training with KV state in the engines and the cache server features (issue 14 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scalesched.decision.features import BASE_SERVER_FEATURES, SERVER_FEATURES
from scalesched.errors import InputError
from scalesched.nn.scheduler import load_scheduler
from scalesched.train.ppo import Trainer, load_config

torch.set_num_threads(1)
CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


pytestmark = pytest.mark.usefixtures("tool_heavy_capacity")


def test_the_study_configs_differ_only_in_the_features() -> None:
    cache = load_config(CONFIGS / "scale-cache-n16.yaml")
    control = load_config(CONFIGS / "scale-cache-control-n16.yaml")
    assert cache.network_config()["server_dim"] == SERVER_FEATURES
    assert control.network_config()["server_dim"] == BASE_SERVER_FEATURES
    assert cache.env_config().kv_policy == control.env_config().kv_policy == "lru"
    differ = {k for k, v in vars(cache).items() if vars(control)[k] != v}
    assert differ == {"name", "cache_features"}
    # every older config keeps its network: no cache features, no KV state
    assert load_config(CONFIGS / "scale-steady-own-n16.yaml").network_config()["server_dim"] == 18


def test_a_bad_kv_policy_names_the_field() -> None:
    with pytest.raises(InputError, match="kv_policy"):
        load_config(None, kv_policy="fifo")


def test_a_short_run_trains_and_validates_with_the_cache(tmp_path: Path) -> None:
    cfg = load_config(
        CONFIGS / "scale-cache-n16.yaml",
        total_steps=32,
        num_envs=1,
        num_steps=32,
        workflows=3,
        warmup_min=1,
        warmup_max=2,
        validation_workflows=6,
        validation_warmup=1,
        validation_seeds=[1000],
        validation_baselines=["eft"],
    )
    Trainer(cfg, tmp_path / "run").train()
    scheduler = load_scheduler(tmp_path / "run" / "best.pt")
    assert scheduler.server_dim == SERVER_FEATURES
