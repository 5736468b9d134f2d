from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from scalesched.env import EnvConfig, SchedulingEnv
from scalesched.errors import InputError
from scalesched.nn.checkpoint import load_checkpoint, save_checkpoint
from scalesched.nn.scheduler import load_scheduler, network_from_checkpoint
from scalesched.train.ppo import Trainer, load_config, obs_to_tensors

torch.set_num_threads(1)


def two_server_setup(tmp_path: Path) -> tuple[Path, Path]:
    """Two CPU servers, one twice as fast; one-task workflows at a light load."""
    cluster = tmp_path / "two.yaml"
    cluster.write_text(
        "name: two\nservers:\n"
        "  - {name: slow, gpu_type: null, gpus: 0, cpu_cores: 8, core_speed: 1.0}\n"
        "  - {name: fast, gpu_type: null, gpus: 0, cpu_cores: 8, core_speed: 2.0}\n"
    )
    wf = tmp_path / "one.json"
    wf.write_text(
        json.dumps(
            {
                "name": "one",
                "schemaVersion": "1.5",
                "workflow": {
                    "specification": {
                        "tasks": [
                            {
                                "name": "t",
                                "id": "t",
                                "parents": [],
                                "children": [],
                                "inputFiles": [],
                                "outputFiles": [],
                            }
                        ],
                        "files": [],
                    },
                    "execution": {
                        "makespanInSeconds": 1.0,
                        "executedAt": "2026-01-01T00:00:00",
                        "tasks": [{"id": "t", "runtimeInSeconds": 1.0}],
                        "machines": [],
                    },
                },
            }
        )
    )
    return cluster, wf


def test_ppo_learns_to_pick_the_fast_server(tmp_path: Path) -> None:
    cluster, wf = two_server_setup(tmp_path)
    cfg = load_config(
        None,
        cluster=str(cluster),
        workload=str(wf),
        workflows=16,
        load=0.1,
        total_steps=6144,  # 3072 left seed 1 at 0.84 once the features counted tools in flight
        num_envs=4,
        num_steps=64,
        learning_rate=3e-3,
        ent_coef=0.0,
        validate_every=0,
        validation_sizes=[],
        seed=1,
    )
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.train()
    env = SchedulingEnv(
        EnvConfig(
            residency="dynamic", cluster=str(cluster), workload=str(wf), workflows=16, load=0.1
        )
    )
    obs, _ = env.reset(seed=123)
    fast = []
    with torch.no_grad():
        for _ in range(100):
            t = obs_to_tensors({k: v[None] for k, v in obs.items()})
            probs = torch.softmax(trainer.net(*t).logits[0], dim=-1)
            fast.append(float(probs[1]))
            obs, _, done, _, _ = env.step(1)
            if done:
                obs, _ = env.reset()
    assert np.mean(fast) > 0.9


def first_observation() -> tuple[torch.Tensor, ...]:
    """The first observation of a small hetero-4 episode, as a batch of one."""
    obs, _ = SchedulingEnv(EnvConfig(residency="dynamic", cluster="hetero-4", workflows=2)).reset(
        seed=0
    )
    return obs_to_tensors({k: v[None] for k, v in obs.items()})


def test_checkpoint_round_trip_and_bad_files(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        total_steps=64,
        num_envs=1,
        num_steps=64,
        workflows=2,
        cluster="hetero-4",
        validate_every=0,
        validation_sizes=[],
    )
    trainer = Trainer(cfg, tmp_path / "run")
    path = tmp_path / "c.pt"
    save_checkpoint(path, trainer.checkpoint_payload())
    net = network_from_checkpoint(load_checkpoint(path))
    t = first_observation()
    assert torch.equal(net(*t).logits, trainer.net(*t).logits)
    # a local checkpoint is named by its path, never by its config's (shipped) name
    assert load_scheduler(path).name == str(path) != cfg.name

    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(path.read_bytes()[:100])
    with pytest.raises(InputError, match="corrupt.pt"):
        load_checkpoint(corrupt)
    other = tmp_path / "other.pt"
    torch.save({"hello": torch.zeros(1)}, other)
    with pytest.raises(InputError, match="format"):
        load_checkpoint(other)
    with pytest.raises(InputError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_resume_continues_a_killed_run(tmp_path: Path) -> None:
    base = dict(
        total_steps=4 * 64,
        num_envs=1,
        num_steps=64,
        workflows=3,
        cluster="hetero-4",
        validate_every=0,
        validation_sizes=[],
        checkpoint_every=1,
    )
    out = tmp_path / "run"
    Trainer(load_config(None, **{**base, "total_steps": 2 * 64}), out).train()
    state = Trainer(load_config(None, **base), out, resume=True).train()
    assert state.update == 4 and state.global_step == 4 * 64
    rows = list(csv.DictReader((out / "train.csv").open()))
    assert [int(r["update"]) for r in rows] == [1, 2, 3, 4]


def test_config_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rat: 0.1\n")
    with pytest.raises(InputError, match="learning_rat"):
        load_config(bad)
    bad.write_text("num_envs: many\n")
    with pytest.raises(InputError, match="num_envs"):
        load_config(bad)


def test_resume_does_not_repeat_a_row_logged_after_the_checkpoint(tmp_path: Path) -> None:
    base = dict(
        total_steps=3 * 64,
        num_envs=1,
        num_steps=64,
        workflows=3,
        cluster="hetero-4",
        validate_every=0,
        validation_sizes=[],
        checkpoint_every=1,
    )
    out = tmp_path / "run"
    Trainer(load_config(None, **{**base, "total_steps": 2 * 64}), out).train()
    # killed after logging update 3 but before saving its checkpoint
    with (out / "train.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        logged = [*reader, {}]
        fields = reader.fieldnames or []
    logged[-1] = {**logged[-2], "update": "3"}
    with (out / "train.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(logged)
    Trainer(load_config(None, **base), out, resume=True).train()
    rows = list(csv.DictReader((out / "train.csv").open()))
    assert [int(r["update"]) for r in rows] == [1, 2, 3]


def _trained_weights(tmp_path: Path, name: str, **srr: object) -> dict[str, torch.Tensor]:
    cfg = load_config(
        None,
        total_steps=64,
        num_envs=1,
        num_steps=64,
        workflows=2,
        cluster="hetero-4",
        validate_every=0,
        validation_sizes=[],
        update_epochs=1,
        num_minibatches=1,
        target_kl=None,
        **srr,
    )
    trainer = Trainer(cfg, tmp_path / name)
    trainer.train()
    return {k: v.clone() for k, v in trainer.net.state_dict().items()}


def test_the_trainer_adds_srr_to_the_loss(tmp_path: Path) -> None:
    """Same seed, same data: SRR on changes the update; SRR on with zero weights does not.

    So the difference comes from the SRR term reaching the gradient, and nothing else.
    """
    off = _trained_weights(tmp_path, "off", srr=False)
    zero = _trained_weights(tmp_path, "zero", srr=True, srr_decorrelation=0.0, srr_kl=0.0)
    on = _trained_weights(tmp_path, "on", srr=True, srr_decorrelation=10.0, srr_kl=10.0)
    assert all(torch.equal(off[k], zero[k]) for k in off)
    changed = [k for k in off if not torch.allclose(off[k], on[k], atol=1e-6)]
    # SRR acts on the attention feature: the encoders and the attention move
    assert any(k.startswith(("task_encoder", "query", "attn_out", "attn_norm")) for k in changed), (
        changed
    )


def test_checkpoints_are_fsynced_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import scalesched.nn.checkpoint as ckpt

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(ckpt.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(
        ckpt.os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))
    )
    save_checkpoint(tmp_path / "c.pt", {"network": "scale", "network_config": {}, "state_dict": {}})
    assert events == ["fsync", "replace", "fsync"]  # the file, the rename, the folder
    assert load_checkpoint(tmp_path / "c.pt")["network"] == "scale"


@pytest.mark.parametrize("critic", ["detached", "own"])
def test_a_separate_critic_trains_and_round_trips(tmp_path: Path, critic: str) -> None:
    cfg = load_config(
        None,
        total_steps=128,
        num_envs=2,
        num_steps=32,
        workflows=2,
        cluster="hetero-4",
        validate_every=0,
        validation_sizes=[],
        critic_encoder=critic,
    )
    trainer = Trainer(cfg, tmp_path / "run")
    groups = trainer._clip_groups()
    assert len(groups) == 2 and sum(len(g) for g in groups) == len(list(trainer.net.parameters()))
    trainer.train()
    net = network_from_checkpoint(load_checkpoint(tmp_path / "run" / "last.pt"))
    t = first_observation()
    assert torch.equal(net(*t).value, trainer.net(*t).value)
    with pytest.raises(InputError, match="critic_encoder"):
        load_config(None, critic_encoder="twin")
    with pytest.raises(InputError, match="critic_encoder"):
        load_config(None, critic_encoder="own", network="mlp16")


def test_set_overrides_any_field_and_names_a_bad_one(tmp_path: Path) -> None:
    from scalesched.train.ppo import parse_overrides

    fields = parse_overrides(
        ["critic_encoder=own", "validation_baselines=[eft, soft_eft]", "target_kl=null"]
    )
    cfg = load_config(None, set_fields=fields, seed=4)
    assert cfg.critic_encoder == "own" and cfg.target_kl is None and cfg.seed == 4
    assert cfg.validation_baselines == ["eft", "soft_eft"]
    with pytest.raises(InputError, match="FIELD=VALUE"):
        parse_overrides(["critic_encoder"])
    with pytest.raises(InputError, match="not a training config field"):
        parse_overrides(["critic=own"])
    with pytest.raises(InputError, match="num_envs"):
        load_config(None, set_fields=parse_overrides(["num_envs=many"]))
