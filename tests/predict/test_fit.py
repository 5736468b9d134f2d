"""Traces, a small fit, and the CLI: the fitted model beats the static estimate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cluster import get_cluster
from scalesched.predict import train
from scalesched.predict.metrics import evaluate
from scalesched.runs.traces import TraceRun, collect


@pytest.fixture(autouse=True)
def short_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train, "STEPS", 400)


def test_traces_join_every_task_to_its_truth() -> None:
    s = collect(TraceRun(get_cluster("hetero-8"), "agentic-mix", workflows=30, seed=5))
    assert s.dur_y.size == s.dur_x.shape[0] == s.dur_base.size > s.tok_y.size > 0
    assert (s.dur_y > 0).all() and np.isfinite(s.dur_x).all()
    assert (s.tok_y >= 1).all()


def test_fit_beats_the_static_estimate_on_an_unseen_seed() -> None:
    spec = get_cluster("hetero-8")
    fitted = train.fit(collect(TraceRun(spec, "agentic-mix", workflows=150, seed=5)), seed=0)
    report = evaluate(fitted, collect(TraceRun(spec, "agentic-mix", workflows=80, seed=6)))
    for head in ("duration", "finish", "tokens"):
        model, static = report[head]["model"], report[head]["static_role"]
        assert model["pinball_loss"] < static["pinball_loss"]
        assert report[head]["static_point"]["coverage_90"] < 0.2
        assert 0.6 < model["coverage_90"] <= 1.0


def test_cli_fit_then_eval(tmp_path: Path) -> None:
    from scalesched.cli import app

    out = tmp_path / "p.npz"
    args = ["--cluster", "hetero-4", "--workflows", "60", "--seed", "7"]
    r = CliRunner().invoke(app, ["predict", "fit", "--out", str(out), *args, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["trace_seeds"] == [7]
    r = CliRunner().invoke(
        app, ["predict", "eval", "--model", str(out), *args[:4], "--seed", "8", "--json"]
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["seed_seen_in_training"] is False
    assert set(rep["heads"]["duration"]["model"]) == {
        "coverage_80",
        "coverage_90",
        "pinball_loss",
        "crps",
    }


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["predict", "eval", "--model", "nope.npz"], "nope.npz: model"),
        (["predict", "eval", "--workflows", "0"], "--workflows"),
        (["predict", "eval", "--cluster", "no-such"], "no-such"),
        (["predict", "eval", "--load", "-1"], "--load"),
        (["predict", "fit", "--out", "."], "--out"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], needle: str) -> None:
    from scalesched.cli import app

    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 2
    assert needle in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
