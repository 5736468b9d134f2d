"""PPO fine-tuning of a policy as it acts: its acting options, drawn settings, kept
checkpoints that load as trained policies."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_ppo_input_baseline import WINDOWS

from scalesched.errors import InputError
from scalesched.nn.checkpoint import load_checkpoint
from scalesched.policies import get_policy
from scalesched.train.ppo import Trainer, load_config

torch.set_num_threads(1)

SETTINGS = [
    {"cluster": "hetero-4", "workload": "agentic-mix", "load": 0.7, "residency": "dynamic"},
    {"cluster": "hetero-4", "workload": "tool-heavy", "load": 0.9, "arrivals": "bursty"},
]
BOUNDED = dict(
    WINDOWS,
    residency="dynamic",
    settings=SETTINGS,
    init="scale-safe",
    heuristic_prior=5.0,
    observed_tokens="p90",
    acting={"margin": 0.05, "loads": "free", "order": "workflow", "age_cap_s": 60},
    input_baseline=2,
    num_envs=4,
    num_steps=64,
    total_steps=2 * 4 * 64,
    keep_every=1,
)


def test_a_bounded_run_keeps_checkpoints_that_act_as_trained_policies(tmp_path: Path) -> None:
    cfg = load_config(None, **BOUNDED)
    trainer = Trainer(cfg, tmp_path / "run")
    run = trainer._start_run()
    envs = run.envs.envs  # type: ignore[attr-defined]
    assert all(env.config.acting.margin == 0.05 and env.settings for env in envs)
    run.envs.close()
    state = trainer.train()
    assert state.update == 2
    for update in (1, 2):
        kept = tmp_path / "run" / f"update-{update}.pt"
        assert load_checkpoint(kept)["observed_tokens"] == "p90"
    policy = get_policy(f"{tmp_path / 'run' / 'update-1.pt'}:margin=0.05,order=workflow")
    assert policy.name.startswith(str(tmp_path / "run" / "update-1.pt"))


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"acting": {"marign": 0.1}}, "acting.marign"),
        ({"acting": {"margin": -1}}, "acting"),
        ({"acting": {"greedy": True}}, "acting.greedy"),
        ({"acting": {"age_cap_s": 60}}, "acting"),
        ({"env_sampler": "uniform", "input_baseline": 1}, "settings"),
        ({"settings": [{"cluster": "hetero-4", "workload": "agentic-mix"}]}, "settings"),
    ],
)
def test_bad_acting_or_settings_name_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        load_config(None, **{**BOUNDED, **overrides})
