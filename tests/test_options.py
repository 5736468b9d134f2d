"""Numbers checked at the door: every number option of every command is ranged by one
table (``scalesched.options.RANGES``), NaN and infinity are refused for any float option,
and a command added later gets both without code of its own."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from scalesched import cli
from scalesched.options import RANGES, Range, check_number

runner = CliRunner()


def _number_options(command: Any, path: str = "") -> list[tuple[str, str]]:
    found = []
    for param in command.params:
        annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        if param.opts and param.opts[0].startswith("--") and annotation in (int, float):
            found.append((path, max(param.opts, key=len)))
    for name, sub in getattr(command, "commands", {}).items():
        found += _number_options(sub, f"{path} {name}".strip())
    return found


def test_every_number_option_has_a_range() -> None:
    options = _number_options(typer.main.get_command(cli.app))
    assert len(options) > 40  # the walk found the tree (a broken walk passes vacuously)
    missing = sorted({o for _, o in options} - set(RANGES))
    assert not missing, f"add these options to scalesched.options.RANGES: {missing}"


def test_ranges() -> None:
    assert check_number("--rate", 0.5) is None
    assert "positive finite" in (check_number("--rate", float("nan")) or "")
    assert "positive finite" in (check_number("--rate", 0.0) or "")
    assert "[0, 9223372036854775807]" in (check_number("--seed", -1) or "")
    assert "finite" in (check_number("--an-option-added-later", float("inf")) or "")
    assert check_number("--an-option-added-later", -5) is None  # ints: only when listed
    assert check_number("--rate", True) is None and check_number("--rate", "x") is None
    assert Range(0, 1).problem(1.0) is None and Range(0, 1).problem(1.5) is not None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "--rate", "nan"], "--rate: must be a positive finite number"),
        (["plan", "--rate", "inf"], "--rate: must be a positive finite number"),
        (["plan", "--rate", "1", "--slo-p95", "nan"], "--slo-p95: slo_p95: must be a positive"),
        (["plan", "--rate", "1", "--seed", "-1"], "--seed: must be in [0, "),
        (["plan", "--rate", "1", "--samples", "10000000"], "--samples: must be in [1, 100000]"),
        (["plan", "shares", "--rate", "-inf"], "--rate: must be a positive finite number"),
        (["plan", "shares", "--seed", "-2"], "--seed: must be in"),
        (["memplan", "--model", "phi-2", "--gpu", "l4", "--time-limit", "nan"], "--time-limit"),
        (["memplan", "--model", "phi-2", "--gpu", "l4", "--pcie-gbs", "inf"], "--pcie-gbs"),
        (["simulate", "--tool-repeat", "nan"], "--tool-repeat: tool_repeat: must be in [0, 1]"),
        (["run", "--local", "--fail-rate", "nan"], "--fail-rate: fail_rate: must be in [0, 1]"),
        (["run", "--local", "--connect-timeout", "inf"], "--connect-timeout"),
        (["eval", "--slo", "nan", "--policies", "eft"], "--slo: must be in [1, "),
        (["predict", "eval", "--seed", "-3"], "--seed: must be in"),
        (["predict", "drift", "--drift", "x:2@0", "--window", "0"], "--window: must be in"),
    ],
)
def test_bad_numbers_end_in_one_line_before_any_work(args: list[str], needle: str) -> None:
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


def test_a_command_added_later_is_checked_for_free() -> None:
    probe = typer.Typer(cls=cli._OneLineErrors)
    ran: list[tuple[int, float]] = []

    @probe.command()
    def new(seed: int = 0, knob: float = 1.0) -> None:
        ran.append((seed, knob))

    @probe.command()
    def other() -> None:
        """A second command, so ``new`` stays a sub-command."""

    assert runner.invoke(probe, ["new", "--seed", "3", "--knob", "2.5"]).exit_code == 0
    assert ran == [(3, 2.5)]
    result = runner.invoke(probe, ["new", "--seed", "-3"])
    assert result.exit_code == 2 and "--seed: must be in [0, " in result.stderr
    result = runner.invoke(probe, ["new", "--knob", "nan"])
    assert result.exit_code == 2 and "--knob: must be a finite number" in result.stderr
    assert ran == [(3, 2.5)]
