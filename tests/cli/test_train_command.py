"""`scalesched train` says what it trained in and what it kept."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()


def test_a_run_over_settings_names_their_worlds_and_its_kept_checkpoints(tmp_path: Path) -> None:
    config = {
        "cluster": "hetero-4",
        "residency": "dynamic",
        "settings": [
            {"cluster": "hetero-4", "workload": "agentic-mix", "load": 0.7},
            {"cluster": "hetero-4", "workload": "agentic-mix", "load": 0.5, "residency": "planned"},
        ],
        "workflows": 3,
        "num_envs": 2,
        "num_steps": 32,
        "total_steps": 64,
        "validation_sizes": [],
        "keep_every": 1,
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    args = ["train", "--config", str(path), "--out", str(out), "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert "world: by setting: dynamic, planned" in result.stderr
    text = " ".join(result.stdout.split())
    assert "no validation (validation_sizes is empty)" in text
    assert "update-N.pt every 1 updates" in text
    assert (out / "update-1.pt").is_file() and not (out / "update-2.pt").exists()
