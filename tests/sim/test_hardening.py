"""Runs that cannot produce numbers say why: scenario ranges, large clocks, output paths."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.errors import InputError, require_finite
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.run import simulate
from scalesched.sim.scenario import MAX_WORKFLOWS
from scalesched.sim.trace import check_gantt_file, check_output_file, plot_gantt, write_trace
from scalesched.workload.source import get_workload, sample_jobs

TABLES = ClusterTables(get_cluster("hetero-4"))


@pytest.mark.parametrize(
    ("scenario", "needle"),
    [
        (Scenario(workflows=MAX_WORKFLOWS + 1, rate=1.0), "--workflows: must be in"),
        (Scenario(workflows=0, rate=1.0), "--workflows: must be in"),
        (Scenario(workflows=5, rate=1.0, seed=-1), "--seed: must be an integer in"),
        (Scenario(workflows=5, rate=1.0, seed=2**64), "--seed: must be an integer in"),
        (Scenario(workflows=5, rate=float("inf")), "--rate: must be a positive finite"),
        (Scenario(workflows=5, rate=float("nan")), "--rate: must be a positive finite"),
        (Scenario(workflows=5, load=float("inf")), "--load: must be a positive finite"),
        (Scenario(workflows=5, load=-1.0), "--load: must be a positive finite"),
        (Scenario(workflows=5, rate=1e-300), "--rate: arrivals would span"),
        (Scenario(workflows=5, rate=1e-9, arrivals="bursty"), "--rate: arrivals would span"),
        (Scenario(workflows=5, rate=1e-300, arrivals="azure-conv"), "--rate: arrivals would"),
        (Scenario(workflows=5, rate=1.0, arrivals="diurnal"), "use poisson, bursty, azure-"),
    ],
)
def test_scenario_ranges(scenario: Scenario, needle: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InputError, match=needle):
        build_jobs(TABLES, scenario)
    assert time.perf_counter() - start < 5


def test_a_replay_file_with_fewer_times_than_workflows(tmp_path: Path) -> None:
    path = tmp_path / "times.txt"
    path.write_text("0\n1\n")
    with pytest.raises(InputError, match=r"times.txt: times: holds 2 arrival times but"):
        build_jobs(TABLES, Scenario(workflows=5, rate=1.0, arrivals=f"replay:{path}"))
    assert len(build_jobs(TABLES, Scenario(workflows=2, rate=1.0, arrivals=f"replay:{path}"))) == 2


@pytest.mark.parametrize(
    ("text", "spread"),
    [("0\n0\n0\n1\n2\n", "are all 0 s"), ("0\n5e-324\n1e-323\n7\n", "span only")],
)
def test_a_replay_prefix_that_offers_no_rate_is_refused(
    tmp_path: Path, text: str, spread: str
) -> None:
    """The whole file spans time, but the times a run uses (its first --workflows) do not:
    the run would report an offered rate of 0 (or infinity), so it is refused naming the
    file; a prefix one time longer spans time and runs."""
    path = tmp_path / "times.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=rf"times.txt: times: the first 3 arrival .* {spread}"):
        build_jobs(TABLES, Scenario(workflows=3, rate=1.0, arrivals=f"replay:{path}"))
    jobs = build_jobs(TABLES, Scenario(workflows=4, rate=1.0, arrivals=f"replay:{path}"))
    arrivals = [job.arrival for job in jobs]
    assert 0 < (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) < float("inf")


def one_task(tmp_path: Path, task: dict[str, object]) -> str:
    path = tmp_path / "one.json"
    doc = {"workflow": {"specification": {"tasks": [{"id": "a", "scalesched": task}]}}}
    path.write_text(json.dumps(doc))
    return str(path)


def test_load_names_the_workload_when_it_cannot_set_a_rate(tmp_path: Path) -> None:
    cpu_only = ClusterTables(get_cluster("homogeneous-2:cpu-64c"))
    big = one_task(tmp_path, {"kind": "llm", "model": "llama-2-70b", "promptTokens": 9})
    big_doc = json.loads(Path(big).read_text())
    big_doc["workflow"]["specification"]["tasks"][0]["scalesched"]["outputTokens"] = 9
    Path(big).write_text(json.dumps(big_doc))
    with pytest.raises(InputError, match=r"one.json: task 'a' model: no server can run"):
        build_jobs(cpu_only, Scenario(workload=big, workflows=3, load=0.5))
    zero = one_task(tmp_path, {"kind": "tool", "tool": "x", "cpuWork": 0})
    with pytest.raises(InputError) as info:
        build_jobs(TABLES, Scenario(workload=zero, workflows=3, load=0.5))
    assert str(info.value).startswith(f"{zero}: tasks:"), info.value
    assert "arrivals" not in str(info.value)


@pytest.mark.parametrize("clock", [1e9, 1e13, 1e17])
def test_the_engine_finishes_at_large_clocks(clock: float) -> None:
    """At 1e17 s a float's resolution is 16 s: no decode step moves the clock."""
    jobs = sample_jobs(get_workload("agentic-mix"), [0.0, 1.0], 0)
    jobs = [dataclasses.replace(j, arrival=clock + j.arrival) for j in jobs]
    start = time.perf_counter()
    result = simulate(get_cluster("hetero-8"), jobs, get_policy("eft"))
    assert time.perf_counter() - start < 10
    assert result.metrics["workflows_completed"] == 2
    require_finite(result.metrics, "run")


def test_require_finite_names_the_key() -> None:
    require_finite({"a": 1.0, "b": "x", "c": 3}, "run")
    with pytest.raises(InputError, match="run: avg: came out nan"):
        require_finite({"ok": 1.0, "avg": float("nan")}, "run")
    with pytest.raises(InputError, match="run: cpu: came out inf"):
        require_finite({"cpu": float("inf")}, "run")


def test_output_paths_are_checked_before_a_run(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--trace: .* is a folder"):
        check_output_file(tmp_path, "--trace")
    with pytest.raises(InputError, match="--trace: folder .*missing does not exist"):
        check_output_file(tmp_path / "missing" / "t.jsonl", "--trace")
    assert not (tmp_path / "missing").exists()
    with pytest.raises(InputError, match="--gantt: g.xyz: unknown image type"):
        check_gantt_file(tmp_path / "g.xyz")
    check_gantt_file(tmp_path / "g.png")
    check_output_file(tmp_path / "t.jsonl", "--trace")


def test_write_errors_are_one_line(tmp_path: Path) -> None:
    result = simulate(
        get_cluster("hetero-8"),
        sample_jobs(get_workload("react"), [0.0], 0),
        get_policy("eft"),
        record_trace=True,
    )
    with pytest.raises(InputError, match="--trace: cannot write"):
        write_trace(result.trace, result.server_names, tmp_path / "no" / "t.jsonl")
    with pytest.raises(InputError, match="--gantt: cannot write"):
        plot_gantt(result.trace, result.server_names, tmp_path / "no" / "g.png")


def test_gantt_says_which_servers_it_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib.axes

    texts: list[str] = []
    real = matplotlib.axes.Axes.annotate
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "annotate",
        lambda self, text, *a, **kw: (texts.append(text), real(self, text, *a, **kw))[1],
    )
    result = simulate(
        get_cluster("hetero-8"),
        sample_jobs(get_workload("react"), [0.0], 0),
        get_policy("eft"),
        record_trace=True,
    )
    busy = sorted({r.server for r in result.trace})
    idle = [n for i, n in enumerate(result.server_names) if i not in busy]
    assert 1 <= len(idle) < 8
    plot_gantt(result.trace, result.server_names, tmp_path / "g.png", max_servers=1)
    named = ", ".join(idle[:6]) + (f" and {len(idle) - 6} more" if len(idle) > 6 else "")
    assert texts == [
        f"idle, not shown: {named}"
        + (f"; {len(busy) - 1} busy servers past the first 1 not shown" if len(busy) > 1 else "")
    ]
    texts.clear()
    wide = simulate(
        get_cluster("hetero-16"),
        sample_jobs(get_workload("react"), [0.0], 0),
        get_policy("eft"),
        record_trace=True,
    )
    plot_gantt(wide.trace, wide.server_names, tmp_path / "w.png")
    n_idle = 16 - len({r.server for r in wide.trace})
    assert n_idle > 6 and texts[0].endswith(f" and {n_idle - 6} more")
