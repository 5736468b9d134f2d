"""``scalesched --help`` grouped by task: one table of which panel each command is listed
under, in the order the help shows them.

Why a table here rather than ``rich_help_panel=`` on each command: the commands are
registered from several modules (the serving commands by ``scalesched.serve.cli``, the
planners as sub-apps), and one table shows the whole grouping at a glance, orders the panels
and the commands in them, and lets a test fail on a command that was added without a
panel. Every command keeps its name; only the help's layout changes.
"""

from __future__ import annotations

from typing import Any

SIMULATE = "Simulate and evaluate"
TRAIN = "Train"
PLAN = "Plan"
SERVE = "Serve and run"
INSPECT = "Inspect"

COMMAND_PANELS: dict[str, str] = {
    "simulate": SIMULATE,
    "demo": SIMULATE,
    "eval": SIMULATE,
    "capacity": SIMULATE,
    "headroom": SIMULATE,
    "train": TRAIN,
    "predict": TRAIN,
    "plan": PLAN,
    "memplan": PLAN,
    "static": PLAN,
    "run": SERVE,
    "serve": SERVE,
    "engine": SERVE,
    "fleet": SERVE,
    "loadgen": SERVE,
    "policies": INSPECT,
    "workloads": INSPECT,
    "clusters": INSPECT,
    "validate": INSPECT,
}
"""Top-level command -> its help panel, in the order ``--help`` lists them."""


def panel_order(names: list[str]) -> list[str]:
    """``names`` in the table's order; a command the table does not know comes last, in
    the order it was registered."""
    position = {name: i for i, name in enumerate(COMMAND_PANELS)}
    return sorted(names, key=lambda name: position.get(name, len(position)))


def install_panels(group: Any) -> None:
    """Give each top-level command of ``group`` its panel from :data:`COMMAND_PANELS`
    (idempotent; a command not in the table is left in Typer's default panel)."""
    for name, command in getattr(group, "commands", {}).items():
        if name in COMMAND_PANELS:
            command.rich_help_panel = COMMAND_PANELS[name]
