"""PPO's input-dependent baseline (Mao et al. 2019) and fine-tuning from shipped weights."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from test_ppo_steady import STEADY

from scalesched.errors import InputError
from scalesched.nn.checkpoint import load_checkpoint
from scalesched.policies.trained import shipped_policies
from scalesched.train.ppo import Trainer, _Rollout, input_baseline_advantages, load_config

torch.set_num_threads(1)

WINDOWS = dict(STEADY, validate_every=0, validation_sizes=[])
"""The steady-state test episodes (a group's members draw the same load from the range)."""


def test_a_step_is_compared_with_the_other_members_at_the_same_simulated_time() -> None:
    # Member 0 decides at 0, 1, 2 (window ends at 3); member 1 at 0 and 2 (ends at 4).
    times = np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 0.0]])
    rewards = np.array([[-1.0, -4.0], [-2.0, -2.0], [-3.0, 0.0]])
    valid = np.array([[True, True], [True, True], [True, False]])
    adv, togo = input_baseline_advantages(times, rewards, valid, np.array([3.0, 4.0]), group=2)
    np.testing.assert_allclose(togo[:, 0], [-6.0, -5.0, -3.0])
    np.testing.assert_allclose(togo[:2, 1], [-6.0, -2.0])
    # Member 1 had accrued 2 of its 6 by t=1 (half of the 4 it accrued from 0 to 2).
    np.testing.assert_allclose(adv[:, 0], [-6 + 6, -5 + 4, -3 + 2])
    # Member 0 had accrued 3 by t=2, so 3 were left: -2 against -3.
    np.testing.assert_allclose(adv[:2, 1], [0.0, 1.0])
    assert adv[2, 1] == 0.0 and togo[2, 1] == 0.0  # a step that did not happen


def test_what_the_arrivals_do_to_every_member_cancels() -> None:
    rng = np.random.default_rng(0)
    t_steps, k = 6, 4
    times = np.tile(np.cumsum(rng.uniform(0.5, 1.5, t_steps))[:, None], (1, k))
    rewards = -rng.uniform(0, 1, (t_steps, k))
    valid = np.ones((t_steps, k), dtype=bool)
    ends = times[-1] + 1.0
    adv, _ = input_baseline_advantages(times, rewards, valid, ends, group=2)
    burst = -rng.uniform(0, 5, (t_steps, 1))  # a burst of arrivals costs every member alike
    shifted, _ = input_baseline_advantages(times, rewards + burst, valid, ends, group=2)
    np.testing.assert_allclose(adv, shifted)
    # Groups are separate: what happens in group 1 leaves group 0's advantages alone.
    other = rewards.copy()
    other[:, 2:] *= 3.0
    regrouped, _ = input_baseline_advantages(times, other, valid, ends, group=2)
    np.testing.assert_allclose(regrouped[:, :2], adv[:, :2])
    assert not np.allclose(regrouped[:, 2:], adv[:, 2:])


def test_training_with_groups_replays_each_window_and_logs_it(tmp_path: Path) -> None:
    cfg = load_config(
        None, **WINDOWS, input_baseline=2, num_envs=4, num_steps=96, total_steps=2 * 4 * 96
    )
    trainer = Trainer(cfg, tmp_path / "run")
    state = trainer.train()
    assert state.episodes == 8  # one window per environment per update
    rows = list(csv.DictReader((tmp_path / "run" / "train.csv").open()))
    assert len(rows) == 2
    assert all(np.isfinite(float(r["mean_response_time_s"])) for r in rows)
    assert 0 < state.global_step <= 2 * 4 * 96


def test_the_members_of_a_group_start_from_the_same_state(tmp_path: Path) -> None:
    cfg = load_config(None, **WINDOWS, input_baseline=2, num_envs=4, num_steps=96)
    trainer = Trainer(cfg, tmp_path / "run")
    run = trainer._start_run()
    n_max = run.envs.single_observation_space["servers"].shape[0]  # type: ignore[index]
    buf = _Rollout.empty(cfg.num_steps, cfg.num_envs, n_max, cfg.server_dim)
    adv, returns, valid = trainer._window_rollout(run, buf, update=1)
    first = buf.servers[0]
    assert torch.equal(first[0], first[1]) and torch.equal(first[2], first[3])
    assert not torch.equal(first[0], first[2])  # another group, another window
    assert valid[0].all() and bool((adv[~valid] == 0).all())
    assert torch.isfinite(returns).all()
    run.envs.close()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (dict(input_baseline=3, num_envs=8), "input_baseline"),
        (dict(input_baseline=2, truncate=False), "input_baseline"),
        (dict(input_baseline=2, env_sampler="uniform"), "input_baseline"),
        (dict(input_baseline=0), "input_baseline"),
    ],
)
def test_groups_that_cannot_work_are_refused(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        load_config(None, **{**WINDOWS, **overrides})


def test_fine_tuning_starts_from_the_shipped_weights(tmp_path: Path) -> None:
    cfg = load_config(None, **WINDOWS, init="scale-dagger", heuristic_prior=5.0)
    trainer = Trainer(cfg, tmp_path / "run")
    saved = load_checkpoint(shipped_policies()["scale-dagger"])["state_dict"]
    for key, value in trainer.net.state_dict().items():
        assert torch.equal(value, saved[key]), key


def test_fine_tuning_refuses_a_network_that_is_not_the_saved_one(tmp_path: Path) -> None:
    cfg = load_config(None, **WINDOWS, init="scale-dagger")  # heuristic_prior left at 0
    with pytest.raises(InputError, match=r"network_config\.heuristic_prior"):
        Trainer(cfg, tmp_path / "run")
    with pytest.raises(InputError, match="init"):
        load_config(None, **WINDOWS, init=str(tmp_path / "none.pt"))


def test_fine_tuning_refuses_a_network_that_reads_other_lengths(tmp_path: Path) -> None:
    """A network costed at p90 lengths must be trained on p90 observations, and back."""
    from scalesched.nn.checkpoint import save_checkpoint

    data = load_checkpoint(shipped_policies()["scale-dagger"])
    save_checkpoint(tmp_path / "p90.pt", {**data, "observed_tokens": "p90"})
    cfg = load_config(None, **WINDOWS, init=str(tmp_path / "p90.pt"), heuristic_prior=5.0)
    with pytest.raises(InputError, match=r"p90\.pt: observed_tokens: is 'p90'.*set observed"):
        Trainer(cfg, tmp_path / "run")
    Trainer(replace(cfg, observed_tokens="p90"), tmp_path / "ok")
    with pytest.raises(InputError, match="observed_tokens"):
        Trainer(replace(cfg, init="scale-safe", observed_tokens="estimate"), tmp_path / "no")
