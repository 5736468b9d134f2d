"""EnvSched wired into training: environments take their settings from the queue and the
trainer feeds the sampler each rollout's learning signal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from scalesched.env.scheduling_env import EnvConfig, SchedulingEnv
from scalesched.env.settings import EnvSetting
from scalesched.train.envsched import EnvSchedSampler, SettingQueue
from scalesched.train.ppo import Trainer, load_config

torch.set_num_threads(1)

SETTINGS = [EnvSetting("agentic-mix", load, "balanced", 20) for load in (0.5, 0.7, 0.9)]


def test_each_episode_runs_the_setting_the_queue_hands_out() -> None:
    queue = SettingQueue(EnvSchedSampler(SETTINGS, seed=0), batch=2)
    env = SchedulingEnv(
        EnvConfig(residency="dynamic", workflows=5, truncate=True), setting_source=queue
    )
    seen = []
    for seed in range(4):
        _, info = env.reset(seed=seed)
        seen.append(info["setting"])
        assert info["load"] == SETTINGS[info["setting"]].load
        assert info["warmup_workflows"] == 20
    assert all(0 <= s < len(SETTINGS) for s in seen)


def test_the_queue_feeds_mean_absolute_advantage_per_setting() -> None:
    sampler = EnvSchedSampler(SETTINGS, seed=0)
    queue = SettingQueue(sampler, batch=2)
    settings = np.array([[0, 1], [0, 1], [2, -1]])
    advantages = np.array([[1.0, -2.0], [-3.0, 4.0], [0.5, 9.0]])
    assert queue.feed(settings, advantages) == 3
    assert np.allclose(sampler.score, [2.0, 3.0, 0.5])


def test_training_with_envsched_runs_and_logs_the_signal(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        total_steps=256,
        num_envs=2,
        num_steps=64,
        workflows=5,
        truncate=True,
        reward_scale=0.01,
        env_sampler="envsched",
        validate_every=0,
        validation_sizes=[16],
        validation_workflows=20,
        validation_warmup=5,
        validation_seeds=[1000],
        heuristic_prior=5.0,
    )
    trainer = Trainer(cfg, tmp_path)
    trainer._setting_queue = lambda: SettingQueue(  # type: ignore[method-assign]
        EnvSchedSampler(SETTINGS, seed=0), cfg.num_envs
    )
    trainer.train()
    rows = (tmp_path / "train.csv").read_text().splitlines()
    header = rows[0].split(",")
    fed = [int(float(r.split(",")[header.index("settings_fed")])) for r in rows[1:]]
    assert fed and all(f >= 1 for f in fed)
