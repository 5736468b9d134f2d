"""``scalesched --help`` grouped by task: every command in a panel, the panels in order, and
every command still reachable by its name."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.commands.panels import COMMAND_PANELS, panel_order

runner = CliRunner()


def top_level_commands() -> list[str]:
    return list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_command_has_a_panel() -> None:
    missing = [name for name in top_level_commands() if name not in COMMAND_PANELS]
    assert not missing, f"add {missing} to commands.panels.COMMAND_PANELS"


def test_help_lists_the_panels_in_order_and_every_command_once() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    titles = re.findall(r"╭─ (.+?) ─", out)
    expected = list(dict.fromkeys(COMMAND_PANELS[n] for n in panel_order(top_level_commands())))
    assert titles == ["Options", *expected]
    assert "─ Commands ─" not in out  # nothing left in Typer's default panel
    listed = re.findall(r"^│ (\w+)\s", out, flags=re.MULTILINE)
    assert sorted(n for n in listed if not n.startswith("-")) == sorted(top_level_commands())


def test_a_panel_groups_its_commands() -> None:
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    serve = out.split("─ Serve and run ─")[1].split("╰")[0]
    for name in ("run", "serve", "engine", "fleet", "loadgen"):
        assert re.search(rf"^│ {name}\s", serve, flags=re.MULTILINE), name


def test_an_unknown_command_goes_last_in_registration_order() -> None:
    assert panel_order(["zeta", "policies", "alpha", "simulate"]) == [
        "simulate",
        "policies",
        "zeta",
        "alpha",
    ]


def test_every_command_still_answers_by_name() -> None:
    for name in top_level_commands():
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, (name, result.stderr)
