"""The shared guards of ``scalesched.errors``: JSON that strict readers accept (nulls with
a reason, never NaN/Infinity) and the refusal of a run in which nothing was measured."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.errors import InputError, json_safe, print_json, require_completed


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"printed {name}")

    return json.loads(text, parse_constant=refuse)


def test_json_safe_nulls_every_non_finite_float_with_a_reason() -> None:
    doc = {
        "ok": 1.5,
        "gap": math.inf,
        "heads": {"duration": {"crps": np.float32("nan"), "n": 0}},
        "levels": [0.1, float("-inf")],
        "bounds": (0.0, math.inf),
    }
    safe = json_safe(doc, {"gap": "no feasible plan"})
    assert safe["ok"] == 1.5 and safe["gap"] is None
    assert safe["gap_null_reason"] == "no feasible plan"
    assert safe["heads"]["duration"]["crps"] is None
    assert "NaN" in safe["heads"]["duration"]["crps_null_reason"]
    assert safe["levels"] == [0.1, None] and "infinite" in safe["levels_null_reason"]
    assert safe["bounds"] == [0.0, None]
    assert doc["gap"] == math.inf  # the input is left as it was
    json.dumps(safe, allow_nan=False)


def test_print_json_prints_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"a": float("nan"), "b": [math.inf]})
    out = _strict(capsys.readouterr().out)
    assert out["a"] is None and out["b"] == [None] and "a_null_reason" in out


def test_a_run_with_nothing_measured_is_refused() -> None:
    require_completed({"workflows_completed": 3, "measured_workflows": 1}, "simulate")
    with pytest.raises(InputError, match=r"run: completed: 0 measured workflows: none of the 4"):
        require_completed(
            {"workflows_submitted": 4, "workflows_completed": 0, "measured_workflows": 0},
            "run",
            "4 failed",
        )
    with pytest.raises(InputError, match="warm-up or cool-down"):
        require_completed(
            {"workflows_submitted": 4, "workflows_completed": 4, "measured_workflows": 0}, "x"
        )


def test_measured_workflows_that_offer_no_rate_are_refused() -> None:
    """Several measured workflows arriving at one instant (a replay) offer no rate: the run
    would print an offered rate of 0. One measured workflow offers none whatever the
    arrivals, and is no error."""
    require_completed({"measured_workflows": 1, "offered_rate_wps": 0.0}, "simulate")
    require_completed({"measured_workflows": 4, "offered_rate_wps": 0.5}, "simulate")
    with pytest.raises(InputError, match=r"^simulate: offered_rate_wps: the 4 measured .* one"):
        require_completed({"measured_workflows": 4, "offered_rate_wps": 0.0}, "simulate")


def test_memplan_json_of_an_infeasible_plan_has_a_null_gap_with_its_reason() -> None:
    args = ["memplan", "--model", "llama-2-70b", "--gpu", "l4", "--cpu-mem-gb", "1"]
    result = CliRunner().invoke(app, [*args, "--no-max-batch", "--time-limit", "2", "--json"])
    assert result.exit_code == 0, result.output
    figures = _strict(result.stdout)
    assert figures["status"] == "infeasible" and figures["gap"] is None
    assert "no feasible plan" in figures["gap_null_reason"]


def test_run_where_nothing_completed_exits_2_instead_of_printing_zeros(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray")
    import scalesched.runtime as runtime
    from scalesched.runtime import cluster as runtime_cluster

    failure = SimpleNamespace(name="wf-0", task="plan", error="EmulatedFault: injected")
    metrics: dict[str, Any] = {"workflows_submitted": 3, "workflows_completed": 0}
    metrics["measured_workflows"] = 0
    metrics |= {"avg_response_time_s": 0.0, "lower_bound_ratio": 0.0}

    def run_jobs(*args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(
            metrics=metrics,
            failures=[failure] * 3,
            dead_servers=[],
            response_times=[math.nan] * 3,  # as a RuntimeResult has them: none completed
        )

    monkeypatch.setattr(runtime, "run_jobs", run_jobs)
    monkeypatch.setattr(runtime_cluster, "local_cluster", lambda *a, **k: contextlib.nullcontext())
    base = ["run", "--local", "--workflows", "3", "--rate", "1", "--cluster", "hetero-4"]
    result = CliRunner().invoke(app, [*base, "--fail-rate", "1", "--json"])
    assert result.exit_code == 2 and result.stdout == "", result.output
    line = result.stderr.strip()
    assert "\n" not in line and "none of the 3 workflows completed" in line
    assert "3 failed, first wf-0 at plan" in line


def test_check_output_path_refuses_what_cannot_be_written(tmp_path: Path) -> None:
    from scalesched.errors import check_output_path

    check_output_path(tmp_path / "a.json", "--out")
    check_output_path(tmp_path / "a.svg", "--plot", "image")
    check_output_path(tmp_path / "new" / "deeper", "--out", "folder")
    check_output_path(tmp_path / "new" / "m.npz", "--out", makes_folders=True)
    with pytest.raises(InputError, match="cannot write in /proc"):
        check_output_path("/proc/new/m.npz", "--out", makes_folders=True)
    cases = [
        (tmp_path, "file", "is a folder"),
        (tmp_path / "no" / "a.json", "file", "does not exist"),
        (tmp_path / "a.xyz", "image", "unknown image type"),
        (Path("/proc/a.png"), "image", "cannot write in /proc"),
    ]
    (tmp_path / "f").write_text("x")
    cases.append((tmp_path / "f" / "sub", "folder", "is a file, not a folder"))
    for path, kind, words in cases:
        with pytest.raises(InputError, match=words):
            check_output_path(path, "--out", kind)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["memplan", "--model", "phi-2", "--gpu", "l4", "--plot", "{tmp}/p.xyz"], "--plot"),
        (["memplan", "--model", "phi-2", "--gpu", "l4", "--out", "/proc/no/p.json"], "--out"),
        (["memplan", "replay", "{tmp}/plan.json", "--plot", "{tmp}/p.txt"], "--plot"),
        (["plan", "--rate", "1", "--out", "{tmp}"], "--out: {tmp} is a folder"),
        (["predict", "fit", "--out", "/proc/no/p.npz"], "--out: cannot write in /proc"),
        (["predict", "eval", "--plot", "{tmp}/p.doc"], "--plot"),
        (["static", "--workflow", "x", "--network", "y", "--gantt", "{tmp}/g.xyz"], "--gantt"),
    ],
)
def test_output_paths_are_checked_before_any_work(
    tmp_path: Path, args: list[str], words: str
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and words.replace("{tmp}", str(tmp_path)) in line, line


def _refuse(spec: int) -> dict[str, Any]:
    raise InputError("f.yaml", "load", f"bad value {spec}")


def test_an_input_error_raised_in_a_worker_process_reaches_the_caller_whole() -> None:
    """``eval --jobs 2`` runs in worker processes: their one-line error must come back as
    itself (it once broke the process pool and printed a traceback)."""
    from scalesched.eval.study import run_parallel

    with pytest.raises(InputError) as err:
        run_parallel(_refuse, [1, 2], 2)
    assert err.value.field == "load" and str(err.value).startswith("f.yaml: load: bad value")


def _die(spec: int) -> dict[str, Any]:
    os._exit(9)  # as a worker killed for memory


def test_a_worker_process_that_dies_stops_the_study_with_one_line() -> None:
    from scalesched.eval.study import run_parallel

    with pytest.raises(InputError, match="worker process of 2 died"):
        run_parallel(_die, [1, 2], 2)
