"""``scalesched policies`` and ``scalesched workloads``: what can be named, one row each,
with the research-only entries marked.

A research-only policy or workload is listed and runs like any other, but it exists to
reproduce a study, as an ablation or as an oracle (``policies.RESEARCH_ONLY``,
``workload.source.RESEARCH_ONLY_WORKLOADS``): a user choosing what to deploy should see that
before reading the docs. The table marks it in a column with a legend line; ``--json``
carries ``research_only`` (a boolean) and ``research_reason`` on every row.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rich.table import Table

from scalesched.commands.common import console

RESEARCH_COLUMN = "research"
RESEARCH_MARK = "yes"
"""The research-only column's entry for a marked row."""
LEGEND = (
    "research = yes: kept to reproduce a study, as an ablation or as an oracle; it runs like "
    "any other but is not a choice for a deployment (--json gives each one's reason)"
)


@dataclass(frozen=True)
class Listed:
    """One row of a listing."""

    name: str
    description: str
    research_only: bool
    research_reason: str | None
    options: str = ""
    """For a policy: its options and defaults (``NAME:KEY=VALUE,...``); empty if none."""


def policy_rows() -> list[Listed]:
    """Every policy ``--policy`` takes by name. An oracle (``policies.ORACLES``) is research
    only whether or not ``RESEARCH_ONLY`` names it: no deployed scheduler sees the future."""
    from scalesched.policies import HEURISTICS, ORACLES, RESEARCH_ONLY, list_policies
    from scalesched.policies.options import describe_options

    rows = []
    for name, description in list_policies():
        reason = RESEARCH_ONLY.get(name)
        if reason is None and name in ORACLES:
            reason = f"oracle: {ORACLES[name][1]}"
        entry = HEURISTICS.get(name) or ORACLES.get(name)
        options = describe_options(entry[0]) if entry else ""
        rows.append(Listed(name, description, reason is not None, reason, options))
    return rows


def workload_rows() -> list[Listed]:
    """Every workload preset, and the spec forms ``--workload`` takes."""
    from scalesched.workload.source import RESEARCH_ONLY_WORKLOADS, list_workloads

    return [
        Listed(
            name, description, name in RESEARCH_ONLY_WORKLOADS, RESEARCH_ONLY_WORKLOADS.get(name)
        )
        for name, description in list_workloads(families=True)
    ]


def listing_table(title: str, rows: list[Listed]) -> Table:
    """The human table: name and description, and a research-only column when any row is
    marked (a listing with none stays two columns)."""
    marked = any(row.research_only for row in rows)
    with_options = any(row.options for row in rows)
    table = Table(title=title)
    table.add_column("name")
    table.add_column("description")
    if with_options:
        table.add_column("options (NAME:KEY=VALUE,...)")
    if marked:
        table.add_column(RESEARCH_COLUMN)
    for row in rows:
        cells = [row.name, row.description]
        if with_options:
            cells.append(row.options)
        if marked:
            cells.append(RESEARCH_MARK if row.research_only else "")
        table.add_row(*cells)
    return table


def print_listing(title: str, rows: list[Listed], as_json: bool) -> None:
    """The rows as one JSON list of objects, or as the table with the legend below it when
    a row is marked."""
    if as_json:
        from scalesched.errors import print_json

        print_json([asdict(row) for row in rows])
        return
    console.print(listing_table(title, rows))
    if any(row.research_only for row in rows):
        console.print(LEGEND, markup=False, highlight=False)
