"""First-hour conventions and bad input at the command line: one line, exit 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalesched.cli import app

ROOT = Path(__file__).parents[2]
runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def one_line_exit_2(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_version() -> None:
    code, out, _ = invoke("--version")
    assert code == 0 and out.strip() == f"scalesched {version('scalesched')}"


def test_python_dash_m_and_import_registers_the_env() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "scalesched", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip().startswith("scalesched ")
    code = (
        "import sys, gymnasium as gym, scalesched\n"
        "from gymnasium.utils.env_checker import check_env\n"
        "light = 'torch' not in sys.modules and 'scalesched.sim.engine' not in sys.modules\n"
        "env = gym.make('scalesched/Scheduling-v0')\n"
        "check_env(env.unwrapped, skip_render_check=True)\n"
        "print(light)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"  # the import itself loads neither torch nor the engine


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["simulate", "--workflows", "1e9"], "--workflows: expected a positive count or 'auto'"),
        (["simulate", "--bogus"], "No such option: --bogus"),
        (["simulate", "--seed"], "requires an argument"),
        (["nosuchcommand"], "No such command"),
        (["simulate", "--workflows", "1000000000"], "--workflows: must be in [1, 1000000]"),
        (["simulate", "--seed", "-1", "--rate", "1"], "Invalid value for '--seed'"),
        (["static", "--workflow", "x", "--network", "y", "--seed", "-1"], "'--seed'"),
        (["train", "--seed", "-1"], "Invalid value for '--seed'"),
        (["simulate", "--rate", "1e-300", "--workflows", "5"], "--rate: arrivals would span"),
        (["simulate", "--rate", "inf", "--workflows", "5"], "--rate: must be a positive finite"),
        (["simulate", "--load", "nan", "--workflows", "5"], "--load: must be a positive finite"),
        (["demo", "--workflows", "-5"], "--workflows: must be in"),
        (["eval", "--load", "0", "--policies", "eft"], "--load: must be a positive"),
        (["eval", "--seeds", "1000000000", "--policies", "eft"], "--seeds: at most 1000"),
        (["eval", "--seeds", "1,x", "--policies", "eft"], "--seeds: expected a count"),
        (["eval", "--seeds", "-1,2", "--policies", "eft"], "--seeds: seeds must be"),
        (["eval", "--jobs", "-1", "--policies", "eft", "--nodes", "4"], "--jobs: must be in"),
        (["eval", "--arrivals", "diurnal", "--policies", "eft"], "--arrivals: unknown process"),
        (["eval", "--out", "/proc/x/y", "--policies", "eft", "--nodes", "4"], "--out: cannot"),
        (["run", "--local", "--time-scale", "inf"], "time_scale: must be a positive finite"),
        (["run", "--local", "--time-scale", "1e9"], "time_scale: must be a positive finite"),
        (["run", "--local", "--object-store-mb", "-5"], "must be in [75, 16777216], got -5"),
    ],
)
def test_bad_arguments_are_one_line(args: list[str], needle: str) -> None:
    assert needle in one_line_exit_2(*args)


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_a_fixed_size_policy_on_another_size(command: str) -> None:
    extra = ["--local"] if command == "run" else []
    line = one_line_exit_2(
        command, "--policy", "mlp-16", "--cluster", "hetero-32", "--rate", "1", *extra
    )
    assert "mlp-16 accepts exactly 16 servers; hetero-32 has 32" in line


@pytest.mark.parametrize("option", ["--trace", "--gantt"])
def test_output_paths(tmp_path: Path, option: str) -> None:
    base = ["simulate", "--workflows", "3", "--rate", "1", "--cluster", "hetero-4"]
    assert "is a folder" in one_line_exit_2(*base, option, str(tmp_path))
    if option == "--gantt":  # a wrong image type makes no folder
        assert "unknown image type" in one_line_exit_2(*base, option, str(tmp_path / "c/g.xyz"))
        assert not (tmp_path / "c").exists()
    missing = tmp_path / "a" / "b" / "out.png"  # made, as for eval's --out (results/...)
    code, _, err = invoke(*base, "--no-progress", option, str(missing))
    assert code == 0 and missing.is_file(), err


def test_validate_takes_a_training_config_and_says_what_it_takes(tmp_path: Path) -> None:
    code, out, err = invoke("validate", str(ROOT / "configs" / "train" / "scale-n16.yaml"))
    assert code == 0 and out.startswith("ok: training config 'scale'"), (out, err)
    bad = tmp_path / "c.yaml"
    bad.write_text("total_steps: many\n")
    assert "total_steps" in one_line_exit_2("validate", str(bad))
    other = tmp_path / "c.toml"
    other.write_text("x = 1\n")
    line = one_line_exit_2("validate", str(other))
    assert "cluster file" in line and "training config" in line and "workflow" in line


def test_static_unknown_policy_lists_heft_and_cpop() -> None:
    line = one_line_exit_2(
        "static",
        "--workflow",
        str(ROOT / "configs" / "workflows" / "wfcommons-blast-small.json"),
        "--network",
        str(ROOT / "configs" / "networks" / "example-4.yaml"),
        "--policy",
        "bogus",
    )
    assert "known: heft, cpop, random" in line


def test_the_manual_lists_every_key_of_simulate_json() -> None:
    code, out, err = invoke(
        "simulate", "--cluster", "hetero-4", "--workflows", "10", "--rate", "0.5", "--json"
    )
    assert code == 0, err
    keys = set(json.loads(out))
    page = (ROOT / "docs" / "first-run.md").read_text()
    start = page.index("`simulate --json` prints")
    listed = set(re.findall(r"`([a-z0-9_/]+)`", page[start : page.index("\n\n", start)]))
    expanded = set()
    for name in listed:  # `p50/p95/p99_response_time_s`
        if "/" in name:
            stem = name.split("_", 1)
            expanded |= {f"{p}_{stem[1]}" for p in stem[0].split("/")}
        else:
            expanded.add(name)
    assert keys <= expanded, f"not in docs/first-run.md: {sorted(keys - expanded)}"
    assert expanded <= keys, f"in docs/first-run.md, not printed: {sorted(expanded - keys)}"


def test_bad_logits_cache_mode_is_one_line() -> None:
    line = one_line_exit_2("simulate", "--workflows", "5", "--logits-cache", "maybe")
    assert "--logits-cache" in line and "on, measure or off" in line
