"""Progress of long work: a rich bar on a terminal, plain lines on stderr anywhere else (a
log, a CI job, a pipe), where a bar prints nothing and minutes of silence look like a hang;
nothing with --no-progress or --json."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.commands import common
from scalesched.commands.common import progress_bar

runner = CliRunner()


def _lines(text: str, label: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{label}: ")]


def test_off_a_terminal_progress_is_a_line_per_tenth(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "LINE_GAP_S", 0.0)  # a slow run: every tenth is seconds apart
    with progress_bar(True, 40, "job", unit="workflows") as tick:
        for done in range(1, 41):
            tick(done)
    out, err = capsys.readouterr()
    lines = _lines(err, "job")
    assert out == ""
    assert lines[0].startswith("job: 0/40 workflows (0%)")
    assert lines[-1].startswith("job: 40/40 workflows (100%)")
    assert len(lines) == 11  # the start, then each tenth: not one line per workflow
    assert all(re.search(r", \d+ s$", line) for line in lines)


def test_a_quick_run_says_where_it_starts_and_ends(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar(True, 40, "job", unit="workflows") as tick:
        for done in range(1, 41):
            tick(done)
    lines = _lines(capsys.readouterr().err, "job")
    assert [line.split(" (")[0] for line in lines] == [
        "job: 0/40 workflows",
        "job: 40/40 workflows",
    ]


def test_a_long_silence_gets_a_line_and_detail_is_shown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "LINE_EVERY_S", 0.0)  # every update is "a minute later"
    with progress_bar(True, 1000, "train", unit="updates") as tick:
        tick(1, "episode RT 3.2 s")
        tick(2)
    lines = _lines(capsys.readouterr().err, "train")
    assert lines[1] == "train: 1/1000 updates (0%), 0 s, episode RT 3.2 s"
    assert len(lines) == 3


def test_hidden_progress_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar(False, 10, "job") as tick:
        tick(5)
    assert capsys.readouterr() == ("", "")


def test_on_a_terminal_it_is_a_bar_not_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Terminal()
    monkeypatch.setattr(sys, "stderr", fake)
    helper = progress_bar(True, 10, "job")
    with helper as tick:
        tick(5)
        assert helper._bar is not None
    assert "job: 5/10" not in fake.getvalue()


def test_simulate_reports_progress_lines_when_stderr_is_not_a_terminal() -> None:
    args = ["simulate", "--cluster", "hetero-4", "--workflows", "20"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    lines = _lines(result.stderr, "tail on hetero-4")
    assert lines[0].startswith("tail on hetero-4: 0/20 workflows")
    assert lines[-1].startswith("tail on hetero-4: 20/20 workflows (100%)")
    quiet = runner.invoke(app, [*args, "--json"])
    assert quiet.exit_code == 0 and not _lines(quiet.stderr, "tail on hetero-4")


def test_eval_reports_its_runs_as_they_finish(tmp_path: Path) -> None:
    args = ["eval", "--policies", "eft,random", "--nodes", "4", "--seeds", "1"]
    args += ["--workflows", "12", "--jobs", "1", "--force", "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    lines = _lines(result.stderr, "simulated runs")
    assert lines[0].startswith("simulated runs: 0/2 (0%)")
    assert lines[-1].startswith("simulated runs: 2/2 (100%)")
