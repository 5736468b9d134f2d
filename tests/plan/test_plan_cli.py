"""`scalesched plan`, `plan shares` and `simulate --deployment` from the command line."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()
KEYS = {
    "predicted_throughput_wps",
    "predicted_mean_response_s",
    "predicted_p95_response_s",
    "gpus_used",
    "planning_time_s",
    "replicas",
}


def test_plan_json_and_out_file_then_simulate(tmp_path):
    out = tmp_path / "plan.yaml"
    res = runner.invoke(
        app,
        [
            "plan",
            "--cluster",
            "hetero-8",
            "--workload",
            "react",
            "--rate",
            "0.5",
            "--slo-p95",
            "60",
            "--samples",
            "100",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)
    assert set(row) >= KEYS and row["meets_slo"] in (True, False)
    assert row["predicted_throughput_wps"] > 0.5 and row["planning_time_s"] < 10
    data = yaml.safe_load(out.read_text())
    assert data["cluster"] == "hetero-8" and len(data["replicas"]) == len(row["replicas"])
    sim = runner.invoke(
        app,
        [
            "simulate",
            "--cluster",
            "hetero-8",
            "--workload",
            "react",
            "--rate",
            "0.5",
            "--workflows",
            "30",
            "--deployment",
            str(out),
            "--json",
        ],
    )
    assert sim.exit_code == 0, sim.output
    metrics = json.loads(sim.output)
    assert metrics["model_loads"] == 0 and metrics["workflows_completed"] == 30


def test_baseline_and_errors(tmp_path):
    res = runner.invoke(
        app,
        [
            "plan",
            "--cluster",
            "hetero-8",
            "--rate",
            "0.5",
            "--baseline",
            "uniform",
            "--samples",
            "60",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["strategy"] == "uniform"
    for args, words in (
        (["plan", "--cluster", "hetero-8"], "--rate"),
        (["plan", "--rate", "1", "--baseline", "best"], "--baseline"),
        (["plan", "--cluster", "nope-3", "--rate", "1"], "nope-3"),
        (["plan", "--rate", "-1"], "--rate"),
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and words in res.output
        assert res.output.count("\n") == 1 and "Traceback" not in res.output


def test_deployment_errors_are_one_line(tmp_path):
    bad = tmp_path / "d.yaml"
    bad.write_text(
        yaml.safe_dump({"name": "x", "replicas": [{"model": "phi-2", "server": "zz", "gpus": [0]}]})
    )
    res = runner.invoke(app, ["simulate", "--cluster", "hetero-8", "--deployment", str(bad)])
    assert res.exit_code == 2 and "replicas[0].server" in res.output


def test_shares_json():
    res = runner.invoke(
        app, ["plan", "shares", "--workload", "deep-research", "--workflows", "40", "--json"]
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    shares = rep["models"]
    assert abs(sum(m["share_mean"] for m in shares.values()) - 1) < 1e-9
    assert rep["e2e_cv"] > 0 and all(m["share_cv"] >= 0 for m in shares.values())


def test_eval_takes_a_deployment_for_one_size(tmp_path):
    plan = tmp_path / "plan.yaml"
    res = runner.invoke(
        app,
        ["plan", "--cluster", "hetero-8", "--rate", "0.5", "--samples", "60", "--out", str(plan)],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        [
            "eval",
            "--policies",
            "eft",
            "--nodes",
            "8",
            "--seeds",
            "1",
            "--workflows",
            "12",
            "--deployment",
            str(plan),
            "--jobs",
            "1",
            "--out",
            str(tmp_path / "ev"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["eval", "--nodes", "8,16", "--deployment", str(plan)])
    assert res.exit_code == 2 and "one --nodes" in res.output


def test_plan_defaults_to_hetero_16_and_its_file_reads_cleanly(tmp_path):
    import re

    out = tmp_path / "results" / "plan.yaml"  # the folder is made, as --help's example needs
    res = runner.invoke(app, ["plan", "--rate", "0.5", "--samples", "100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert yaml.safe_load(text)["cluster"] == "hetero-16"
    head = text.splitlines()[0]
    assert head.startswith("# scalesched plan") and "predicted throughput" in head
    assert not re.search(r"\d\.\d{5,}", head), head  # 4 significant digits, not 16
    assert f"deployment written to {out}" in " ".join(res.stderr.split())
    assert "meets_slo: n/a" in res.stdout
