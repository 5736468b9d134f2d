"""`scalesched memplan` and `scalesched memplan replay`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()
KEYS = {"iteration_time_s", "tflops", "peak_gpu_mem_gb", "max_batch", "solver_time_s", "gap"}


def test_plan_json_out_plot_and_replay(tmp_path: Path) -> None:
    plan, png = tmp_path / "plan.json", tmp_path / "plan.png"
    args = ["memplan", "--model", "llama-2-7b", "--gpu", "L4-24G", "--batch", "2", "--seq", "1024"]
    r = runner.invoke(app, [*args, "--json", "--out", str(plan), "--plot", str(png)])
    assert r.exit_code == 0, r.output
    figures = json.loads(r.stdout)
    assert figures.keys() >= KEYS
    assert figures["fits"] and figures["max_batch"] >= 2
    assert png.stat().st_size > 10_000
    r = runner.invoke(app, ["memplan", "replay", str(plan), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["iteration_time_s"] == figures["iteration_time_s"]
    assert rep["peak_gpu_mem_gb"] == figures["peak_gpu_mem_gb"]


def test_baseline_strategy_and_out_of_memory() -> None:
    r = runner.invoke(
        app,
        ["memplan", "--model", "llama-2-7b", "--gpu", "l4", "--strategy", "none", "--json",
         "--no-max-batch"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    figures = json.loads(r.stdout)
    assert figures["status"] == "out of memory" and figures["iteration_time_s"] is None


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (
        ["memplan", "--model", "gpt-9", "--gpu", "L4-24G"],
        ["memplan", "--model", "llama-2-7b", "--gpu", "L4-24G", "--strategy", "magic"],
        ["memplan", "--gpu", "L4-24G"],
        ["memplan", "--model", "llama-2-7b", "--gpu", "L4-24G", "--batch", "0"],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error:"), r.stderr
    bad = tmp_path / "bad.json"
    plan = {"state": "gpu-fp32", "choices": ["keep", "warp"]}
    bad.write_text(
        json.dumps({"model": "llama-2-7b", "gpu": "L4-24G", "batch": 1, "seq": 64, "plan": plan})
    )
    r = runner.invoke(app, ["memplan", "replay", str(bad)])
    assert r.exit_code == 2 and "bad.json: plan.choices" in r.stderr, r.stderr
    bad.write_text("{")
    r = runner.invoke(app, ["memplan", "replay", str(bad)])
    assert r.exit_code == 2 and "invalid JSON" in r.stderr


def test_the_table_reads_as_words_and_written_files_are_announced(tmp_path: Path) -> None:
    plan = tmp_path / "results" / "plan.json"  # a folder that does not exist yet
    args = ["memplan", "--model", "llama-2-7b", "--gpu", "L4-24G", "--batch", "2", "--seq", "1024"]
    r = runner.invoke(app, [*args, "--no-max-batch", "--out", str(plan)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "{" not in r.stdout and "None" not in r.stdout  # no Python dict, no bare None
    layers = next(line for line in r.stdout.splitlines() if "layers" in line)
    assert any(word in layers for word in ("keep", "recompute", "offload")), layers
    assert "n/a" in next(line for line in r.stdout.splitlines() if "max_batch" in line)
    assert plan.is_file() and f"plan written to {plan}" in " ".join(r.stderr.split())
