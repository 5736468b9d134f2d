"""Every command's ``--help`` reads as plain text: plain option types (TEXT, INTEGER, no
``<bool>`` placeholder, no ``[0<=x<=...]`` range), no reStructuredText from the docstrings,
and a sentence of help for every option and argument."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from scalesched.cli import app

runner = CliRunner()

MARKUP = (
    (re.compile(r"``"), "double backticks"),
    (re.compile(r":[a-z]+(?::[a-z]+)?:`"), "a reST role such as :func:`...`"),
    (re.compile(r"^\s*\.\. [a-z-]+::", re.MULTILINE), "a reST directive"),
)
PLACEHOLDERS = ("<bool>", "<str>", "<int", "<float", "<path", "<list", "RANGE", "<=x<=")


def command_paths() -> list[tuple[str, ...]]:
    """Every command and sub-command of the CLI, as argument paths."""
    paths: list[tuple[str, ...]] = [()]

    def walk(command: object, prefix: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            paths.append((*prefix, name))
            walk(sub, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return paths


def markup_problems(text: str) -> list[str]:
    """What in a rendered help is markup or a placeholder rather than plain text."""
    found = [what for pattern, what in MARKUP if pattern.search(text)]
    found += [f"type placeholder {bad!r}" for bad in PLACEHOLDERS if bad in text]
    return found


def undocumented(command: Any, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every command without help and every option or argument without help text, in the
    command tree under ``command``."""
    where = " ".join(prefix) or "scalesched"
    missing = [] if (command.help or command.short_help) else [f"{where}: no command help"]
    for param in command.params:
        if not (getattr(param, "help", None) or "").strip():
            missing.append(f"{where} {max(param.opts, key=len)}: no help text")
    for name, sub in getattr(command, "commands", {}).items():
        missing += undocumented(sub, (*prefix, name))
    return missing


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "scalesched")
def test_help_shows_plain_types_and_no_markup(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    problems = markup_problems(result.stdout)
    assert not problems, f"{' '.join(path)} --help shows {problems}"


def test_every_option_and_argument_is_explained() -> None:
    missing = undocumented(typer.main.get_command(app))
    assert not missing, "\n".join(missing)


def test_the_checks_catch_what_they_look_for() -> None:
    """A probe command with an unexplained option and reST in its docstring fails both."""
    probe = typer.Typer(help="A probe.")

    @probe.command()
    def go(
        count: Annotated[int, typer.Option()] = 1,
        name: Annotated[str, typer.Option(help="A name.")] = "x",
    ) -> None:
        """Run :func:`go` on ``count`` items."""

    @probe.command()
    def other() -> None:
        """Another, so that the probe is a group."""

    missing = undocumented(typer.main.get_command(probe))
    assert missing == ["go --count: no help text"]
    rendered = "Run :func:`go` on ``count``\n│ --flag <bool> │\n│ --seed INTEGER RANGE [0<=x<=9] │"
    assert len(markup_problems(rendered)) == 5
    assert markup_problems("Run `go` on `count` items; see `scalesched policies`.") == []


def test_help_keeps_square_brackets_and_names_types() -> None:
    out = runner.invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"}).stdout
    flat = " ".join(out.split())
    assert "[default: found from the run's responses by MSER]" in flat  # was eaten as markup
    assert re.search(r"--workflows\s+TEXT", out) and re.search(r"--load\s+FLOAT", out)
    assert re.search(r"--seed\s+INTEGER\s+Seed of every random choice", out)
    train = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).stdout
    train = " ".join(train.split()).replace("│ ", "").replace(" │", "")
    assert "validation_baselines=[eft, soft_eft]" in train
