"""``scalesched policies`` / ``workloads``: every name listed once, research-only entries
marked in the table (column and legend) and in ``--json`` (a boolean and the reason)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scalesched import policies as registry
from scalesched.cli import app
from scalesched.policies.trained import shipped_policies
from scalesched.workload import source

runner = CliRunner()


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def rows_of(out: str) -> dict[str, list[str]]:
    """Table rows by name (the header's under "name"): the cells of each line that starts
    a row."""
    rows = {}
    for line in out.splitlines():
        line = line.replace("┃", "│")
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if line.startswith("│") and cells[0]:
            rows[cells[0]] = cells
    return rows


def test_policies_json_marks_the_research_only_ones() -> None:
    listed = json.loads(invoke("policies", "--json"))
    by_name = {row["name"]: row for row in listed}
    assert len(by_name) == len(listed)
    known = {*registry.HEURISTICS, *registry.ORACLES, *shipped_policies()}
    assert set(by_name) == known
    research = {name for name, row in by_name.items() if row["research_only"] is True}
    assert research == {*registry.RESEARCH_ONLY, *registry.ORACLES}
    assert {"rollout_oracle", "pred_mean", "scale-nosrr", "mlp-16"} <= research
    for name in ("scale", "tail", "eft", *registry.BEST_HEURISTIC_CANDIDATES):
        assert by_name[name]["research_only"] is False and by_name[name]["research_reason"] is None
    assert all(by_name[name]["research_reason"] for name in research)


def test_every_research_only_name_is_a_policy() -> None:
    """A renamed or removed policy must leave the marker table too."""
    known = {*registry.HEURISTICS, *registry.ORACLES, *shipped_policies()}
    assert set(registry.RESEARCH_ONLY) <= known


def test_no_best_heuristic_candidate_is_research_only() -> None:
    assert not set(registry.BEST_HEURISTIC_CANDIDATES) & set(registry.RESEARCH_ONLY)


def test_policies_table_has_the_column_and_the_legend() -> None:
    out = invoke("policies")
    rows = rows_of(out)
    assert rows["name"][-1] == "research"
    assert rows["rollout_oracle"][-1] == "yes" and rows["scale-ssm"][-1] == "yes"
    assert rows["scale"][-1] == "" and rows["tail"][-1] == ""
    assert "research = yes: kept to reproduce a study" in " ".join(out.split())


def test_a_new_oracle_is_marked_without_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(registry.ORACLES, "future_peek", (object, "sees the future"))
    by_name = {row["name"]: row for row in json.loads(invoke("policies", "--json"))}
    assert by_name["future_peek"]["research_only"] is True
    assert by_name["future_peek"]["research_reason"] == "oracle: sees the future"


def test_workloads_json_lists_every_preset_with_the_flag() -> None:
    listed = json.loads(invoke("workloads", "--json"))
    names = [row["name"] for row in listed]
    assert names == [name for name, _ in source.list_workloads(families=True)]
    assert all(
        row["research_only"] is (row["name"] in source.RESEARCH_ONLY_WORKLOADS) for row in listed
    )
    assert not next(r for r in listed if r["name"] == "agentic-mix")["research_only"]


def test_a_research_only_workload_is_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(source.RESEARCH_ONLY_WORKLOADS, "debate", "a study's stress shape")
    out = invoke("workloads")
    rows = rows_of(out)
    assert rows["debate"][-1] == "yes" and rows["react"][-1] == ""
    assert "research = yes" in out
    row = next(r for r in json.loads(invoke("workloads", "--json")) if r["name"] == "debate")
    assert row["research_only"] is True and row["research_reason"] == "a study's stress shape"


def test_a_listing_with_nothing_marked_has_no_column_or_legend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(source.RESEARCH_ONLY_WORKLOADS):
        monkeypatch.delitem(source.RESEARCH_ONLY_WORKLOADS, name)
    out = invoke("workloads")
    assert rows_of(out)["name"] == ["name", "description"] and "research = yes" not in out


def test_policies_list_their_options_and_simulate_takes_them() -> None:
    by_name = {row["name"]: row for row in json.loads(invoke("policies", "--json"))}
    assert "horizon_s=20.0" in by_name["rollout"]["options"]
    assert by_name["eft"]["options"] == ""
    out = json.loads(invoke("simulate", "--policy", "tail:level=0.5", "--workflows", "6", "--json"))
    assert out["policy"] == "tail:level=0.5"
    bad = runner.invoke(app, ["simulate", "--policy", "rollout:horizon_s=-1", "--workflows", "6"])
    assert bad.exit_code == 2 and "rollout" in bad.stderr and "Traceback" not in bad.stderr
