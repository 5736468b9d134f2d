from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import matplotlib.image
import pytest
from typer.testing import CliRunner

from scalesched.cli import DEMO_LEARNED, app
from scalesched.eval.study import StudyConfig, mean_ci, run_study, seeds_from

runner = CliRunner()


def small_eval(out: Path) -> list[dict[str, str]]:
    result = runner.invoke(
        app,
        [
            "eval",
            "--policies",
            "eft,random",
            "--nodes",
            "4,8",
            "--seeds",
            "2",
            "--workflows",
            "12",
            "--out",
            str(out),
            "--jobs",
            "2",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.stderr
    with (out / "results.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_small_eval_writes_files_and_columns(tmp_path: Path) -> None:
    rows = small_eval(tmp_path / "a")
    assert len(rows) == 2 * 2 * 2
    for col in (
        "policy",
        "n_servers",
        "seed",
        "status",
        "avg_response_time_s",
        "p95_response_time_s",
        "lower_bound_ratio",
        "workflows_completed",
    ):
        assert col in rows[0]
    assert {r["policy"] for r in rows} == {"eft", "random"}
    for name in ("response_time_vs_n.png", "gantt.png"):
        image = matplotlib.image.imread(tmp_path / "a" / name)
        assert image.ndim == 3 and min(image.shape[:2]) >= 200
        assert image[..., :3].std() > 0.05  # something is drawn, not a blank canvas
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    markdown = (tmp_path / "a" / "summary.md").read_text()
    for n in ("4", "8"):
        means = {
            p: statistics.fmean(
                float(r["avg_response_time_s"])
                for r in rows
                if r["policy"] == p and r["n_servers"] == n
            )
            for p in ("eft", "random")
        }
        block = summary["by_n"][n]
        # the summary's means are the CSV's, and the best heuristic is the lower of them
        for p, mean in means.items():
            assert block["policies"][p]["mean_rt"] == pytest.approx(mean, rel=1e-12)
            assert f"| {p} | {mean:.2f}" in markdown
        # the best heuristic is the registry's: random is never a candidate
        assert block["best_heuristic"] == "eft"
        assert means["eft"] != means["random"]
    # 12-workflow runs cannot show a steady state: their ratios are withheld, and said so
    assert "not steady" in markdown and "eval --force" in markdown
    assert "paired_ratio_to_best" not in summary["by_n"]["4"]["policies"]["random"]


def test_eval_force_prints_the_withheld_ratios_marked(tmp_path: Path) -> None:
    # dynamic residency: the figures this test reads fit the table's columns unwrapped
    args = ["eval", "--policies", "eft,random", "--nodes", "4", "--seeds", "2"]
    args += ["--workflows", "12", "--jobs", "1", "--no-progress", "--force"]
    args += ["--residency", "dynamic"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    entry = summary["by_n"]["4"]["policies"]["random"]
    assert entry["paired_ratio_to_best"] > 1 and "not steady" in entry["ratio_withheld"]
    assert "(not steady)" in result.stdout


def test_same_seeds_same_csv(tmp_path: Path) -> None:
    def strip(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{k: v for k, v in r.items() if k != "sim_wall_time_s"} for r in rows]

    assert strip(small_eval(tmp_path / "a")) == strip(small_eval(tmp_path / "b"))


def test_arrivals_reach_every_run_and_the_csv() -> None:
    """--arrivals is a setting of the study: each run draws its times from that process (same
    workflows, other arrival times, so other response times), and the CSV records it."""

    def rows(arrivals: str) -> list[dict[str, object]]:
        cfg = StudyConfig(
            policies=("eft", "tail"), nodes=(4,), seeds=(3,), workflows=30, arrivals=arrivals
        )
        return run_study(cfg, executor="serial")

    poisson, bursty = rows("poisson"), rows("bursty")
    assert {r["arrivals"] for r in poisson} == {"poisson"}
    assert {r["arrivals"] for r in bursty} == {"bursty"}
    for a, b in zip(poisson, bursty, strict=True):
        assert a["tasks_completed"] == b["tasks_completed"]  # the same workflows
        assert a["avg_response_time_s"] != b["avg_response_time_s"]
    # both policies of a study see one arrival sequence
    assert bursty[0]["offered_rate_wps"] == bursty[1]["offered_rate_wps"]


def test_workload_identical_across_policies() -> None:
    cfg = StudyConfig(policies=("eft", "random"), nodes=(4,), seeds=(3,), workflows=10)
    rows = run_study(cfg, executor="serial")
    assert rows[0]["tasks_completed"] == rows[1]["tasks_completed"]
    assert rows[0]["mean_lower_bound_s"] == rows[1]["mean_lower_bound_s"]


def test_fixed_size_policy_is_reported_unsupported_not_faked(tmp_path: Path) -> None:
    import torch

    from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
    from scalesched.nn import build_network
    from scalesched.nn.checkpoint import save_checkpoint

    net = build_network("mlp16", TASK_FEATURES, SERVER_FEATURES)
    path = tmp_path / "mlp.pt"
    save_checkpoint(
        path,
        {
            "network": "mlp16",
            "state_dict": net.state_dict(),
            "network_config": {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES},
            "metadata": {"name": "mlp-16"},
        },
    )
    torch.set_num_threads(1)
    cfg = StudyConfig(policies=(str(path),), nodes=(8, 16), seeds=(0,), workflows=5)
    rows = run_study(cfg, executor="serial")
    by_n = {r["n_servers"]: r for r in rows}
    assert by_n[8]["status"] == "unsupported" and "avg_response_time_s" not in by_n[8]
    assert by_n[16]["status"] == "ok"


@pytest.mark.parametrize(
    ("text", "seeds"), [("3", (0, 1, 2)), ("3,7,9", (3, 7, 9)), ("7,", (7,)), ("0,1", (0, 1))]
)
def test_seeds_are_a_count_or_a_list_and_a_trailing_comma_names_one(
    text: str, seeds: tuple[int, ...]
) -> None:
    assert seeds_from(text) == seeds


def test_mean_ci() -> None:
    m, ci = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and 2.4 < ci < 2.5  # t(0.975, 2) * 1 / sqrt(3) = 2.484


def test_demo_code_path_with_a_reduced_budget(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "demo",
            "--out",
            str(tmp_path / "d"),
            "--seeds",
            "1",
            "--workflows",
            "8",
            "--jobs",
            "2",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "N = 48" in result.stdout
    assert (tmp_path / "d" / "response_time_vs_n.png").exists()
    # it ends with the verdict, computed: none here, as 8-workflow runs are not steady
    flat = " ".join(result.stdout.split())
    verdict = flat[flat.index("Verdict:") :]
    assert flat.index("Verdict:") > flat.index("results:") and flat.count("Verdict:") == 1
    assert verdict.startswith(f"Verdict: none for {DEMO_LEARNED[0]} at N = 16, 32, 48")


def test_eval_over_ray_gives_the_same_rows(tmp_path: Path) -> None:
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    args = [
        "eval",
        "--policies",
        "eft,random",
        "--nodes",
        "4",
        "--seeds",
        "1",
        "--workflows",
        "8",
        "--no-progress",
    ]
    local = runner.invoke(app, [*args, "--out", str(tmp_path / "p"), "--jobs", "1"])
    remote = runner.invoke(app, [*args, "--out", str(tmp_path / "r"), "--ray-local"])
    assert local.exit_code == 0 and remote.exit_code == 0, remote.stderr

    def rows(p: Path) -> list[dict[str, str]]:
        with (p / "results.csv").open() as fh:
            return [
                {k: v for k, v in r.items() if k != "sim_wall_time_s"} for r in csv.DictReader(fh)
            ]

    assert rows(tmp_path / "p") == rows(tmp_path / "r")
