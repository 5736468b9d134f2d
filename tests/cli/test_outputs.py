"""Every file a command writes is announced on stderr (stdout stays the report or the JSON
object), a Gantt chart says it is being drawn before the seconds it takes, an output under
a folder that does not exist yet (the examples' results/) is written there, and a report's
tables keep their rows whole at 80 columns."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.commands import common

runner = CliRunner()


def test_simulate_announces_its_trace_and_gantt_and_makes_their_folder(tmp_path: Path) -> None:
    trace, gantt = tmp_path / "results" / "trace.jsonl", tmp_path / "results" / "gantt.png"
    args = ["simulate", "--cluster", "hetero-4", "--workflows", "20", "--json"]
    result = runner.invoke(app, [*args, "--trace", str(trace), "--gantt", str(gantt)])
    assert result.exit_code == 0, result.stderr
    json.loads(result.stdout)  # stdout is the JSON object alone
    err = result.stderr.splitlines()
    drawing = next(i for i, line in enumerate(err) if line.startswith("drawing Gantt chart of"))
    written = err.index(f"Gantt chart written to {gantt}")
    assert drawing < written and f" tasks to {gantt} ..." in err[drawing]
    assert f"trace written to {trace}" in err
    assert gantt.stat().st_size > 1000 and trace.read_text().count("\n") > 20


def test_a_streamed_trace_is_announced_too(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    args = ["simulate", "--cluster", "hetero-4", "--workflows", "20", "--no-progress"]
    result = runner.invoke(app, [*args, "--trace", str(trace)])
    assert result.exit_code == 0, result.stderr
    assert f"trace written to {trace}" in result.stderr and trace.is_file()


def test_an_output_folder_that_cannot_be_made_is_one_line_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    args = ["simulate", "--cluster", "hetero-4", "--workflows", "20"]
    result = runner.invoke(app, [*args, "--gantt", str(blocker / "sub" / "g.png")])
    assert result.exit_code == 2 and result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith("error: --gantt") and "not a folder" in line
    assert len(line.splitlines()) == 1


SUMMARY = """### N = 16 (best heuristic: fcfs_workflow)

| policy | mean RT (s) | p95 RT (s) | RT / lower bound | RT / best heuristic (seed-paired, 95% CI) | steady runs |
|---|---|---|---|---|---|
| scale-dagger | 27.81 ± 1.19 | 61.50 ± 7.27 | 1.534 ± 0.022 | 1.034 ± 0.022 | 3/3 |
| fcfs_workflow | 27.97 ± 1.43 | 61.37 ± 7.60 | 1.532 ± 0.021 | 1.000 | 3/3 |

Mean ± half-width of the 95% confidence interval over seeds (Student t)."""  # noqa: E501


def test_a_markdown_report_keeps_its_table_rows_whole_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=screen, width=80))
    common.print_markdown(SUMMARY)
    lines = screen.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not any(line.lstrip().startswith(("|", "(seed")) for line in lines)
    starts = [line.split()[0] for line in lines if line.split()]
    assert "scale-dagger" in starts and "fcfs_workflow" in starts  # each row begins whole
    assert lines[0] == "### N = 16 (best heuristic: fcfs_workflow)"
    assert lines[-1].startswith("Mean ± half-width")
