"""The command line: outputs users read, and bad input that ends in one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.policies import HEURISTICS

runner = CliRunner()

JSON_KEYS = {
    "avg_response_time_s",
    "p50_response_time_s",
    "p95_response_time_s",
    "p99_response_time_s",
    "makespan_s",
    "workflows_completed",
    "tasks_completed",
    "decisions",
    "mean_utilization",
    "lower_bound_ratio",
    "sim_wall_time_s",
}


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_simulate_json_has_the_documented_keys() -> None:
    code, out, _ = run("simulate", "--cluster", "hetero-8", "--workflows", "20", "--json")
    assert code == 0, out
    metrics = json.loads(out)
    assert metrics.keys() >= JSON_KEYS
    assert metrics["workflows_completed"] == 20


def test_simulate_same_seed_same_numbers() -> None:
    args = (
        "simulate",
        "--cluster",
        "hetero-8",
        "--workflows",
        "20",
        "--json",
        "--seed",
        "4",
        "--policy",
        "random",
    )
    a, b = json.loads(run(*args)[1]), json.loads(run(*args)[1])
    a.pop("sim_wall_time_s")
    b.pop("sim_wall_time_s")
    assert a == b


@pytest.mark.parametrize("cluster", ["hetero-16", "hetero-48", "configs/clusters/example-lab.yaml"])
@pytest.mark.parametrize("policy", sorted(HEURISTICS))
def test_every_policy_runs_on_the_named_clusters(cluster: str, policy: str) -> None:
    code, out, err = run(
        "simulate", "--cluster", cluster, "--policy", policy, "--workflows", "15", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["workflows_completed"] == 15


def test_table_trace_and_gantt(tmp_path: Path) -> None:
    trace, gantt = tmp_path / "t.jsonl", tmp_path / "g.png"
    code, out, err = run(
        "simulate",
        "--cluster",
        "hetero-4",
        "--workflows",
        "5",
        "--trace",
        str(trace),
        "--gantt",
        str(gantt),
        "--no-progress",
    )
    assert code == 0, err
    assert "avg_response_time_s" in out
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert rows and {"workflow", "task", "server", "ready", "start", "end"} <= rows[0].keys()
    assert gantt.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("command", ["policies", "clusters", "workloads"])
def test_listings(command: str) -> None:
    code, out, _ = run(command)
    assert code == 0 and len(out.splitlines()) > 3


def test_validate_accepts_good_files() -> None:
    assert run("validate", "configs/clusters/example-lab.yaml")[0] == 0
    assert run("validate", "configs/workflows/support-agent.json")[0] == 0


def one_line_exit_2(args: list[str], *needles: str) -> None:
    code, out, err = run(*args)
    assert code == 2, (out, err)
    text = err.strip()
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    for needle in needles:
        assert needle in text, text


def test_bad_inputs_fail_cleanly(tmp_path: Path) -> None:
    one_line_exit_2(["simulate", "--policy", "nope"], "--policy", "nope")
    one_line_exit_2(["simulate", "--cluster", "hetero-zero"], "hetero-zero")
    one_line_exit_2(["simulate", "--workload", "nope"], "--workload")
    one_line_exit_2(["simulate", "--load", "-1"], "load")
    one_line_exit_2(["simulate", "--rate", "-2"], "rate")

    broken = tmp_path / "broken.yaml"
    broken.write_text("servers: [\n")
    one_line_exit_2(["validate", str(broken)], "broken.yaml")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: x\nservers:\n  - type: tpu-v9\n    count: 1\n")
    one_line_exit_2(["simulate", "--cluster", str(unknown)], "unknown.yaml", "servers[0].type")
    negative = tmp_path / "neg.yaml"
    negative.write_text("name: x\nservers:\n  - type: cpu-32c\n    count: -3\n")
    one_line_exit_2(["validate", str(negative)], "neg.yaml", "count")

    cyclic = tmp_path / "cycle.json"
    cyclic.write_text(
        json.dumps(
            {
                "name": "c",
                "workflow": {
                    "specification": {
                        "tasks": [
                            {"name": "a", "id": "a", "parents": ["b"], "children": ["b"]},
                            {"name": "b", "id": "b", "parents": ["a"], "children": ["a"]},
                        ],
                        "files": [],
                    }
                },
            }
        )
    )
    one_line_exit_2(["validate", str(cyclic)], "cycle.json")
    badmodel = tmp_path / "model.json"
    badmodel.write_text(
        json.dumps(
            {
                "name": "m",
                "workflow": {
                    "specification": {
                        "tasks": [
                            {
                                "name": "a",
                                "id": "a",
                                "parents": [],
                                "children": [],
                                "scalesched": {"kind": "llm", "model": "gpt-17"},
                            }
                        ],
                        "files": [],
                    }
                },
            }
        )
    )
    one_line_exit_2(["validate", str(badmodel)], "model.json", "model")
    # A task no server can run: a 70b model on a cluster of L4 servers.
    small = tmp_path / "small.yaml"
    small.write_text("name: small\nservers:\n  - type: l4-24g-x1\n    count: 2\n")
    one_line_exit_2(["simulate", "--cluster", str(small), "--workflows", "5"], "no server can run")
    one_line_exit_2(["simulate", "--policy", str(tmp_path / "missing.pt")], "missing.pt")
    one_line_exit_2(["validate", str(tmp_path / "nothing.txt")], "nothing.txt")


def test_simulate_logits_cache_reports_branches() -> None:
    base = ("simulate", "--cluster", "hetero-8", "--workload", "best-of-n", "--rate", "0.5")
    base += ("--workflows", "20", "--warmup", "0", "--cooldown", "0", "--json")
    code, out, _ = run(*base, "--logits-cache", "on")
    assert code == 0, out
    on = json.loads(out)
    assert on["branch_calls"] > 0 and 0 < on["branch_reused_frac"] <= on["branch_repeat_frac"]
    measured = json.loads(run(*base, "--logits-cache", "measure")[1])
    assert measured["branch_reused_frac"] == 0.0
    assert measured["branch_repeat_frac"] == on["branch_repeat_frac"]
    assert "branch_calls" not in json.loads(run(*base)[1])
