"""The committed robustness suite: it loads, covers what it promises, keeps its evaluation
mixes and seeds out of training and selection, and a bad file gets one line naming the
field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.errors import InputError
from scalesched.eval.suite import load_suite, mix_of, suite_path
from scalesched.train.dagger import TRAIN_SEED_BASE

ROOT = Path(__file__).parents[2]


def shipped() -> dict[str, Any]:
    return dict(yaml.safe_load(suite_path("robustness").read_text()))


def test_the_shipped_suite_covers_its_promise() -> None:
    suite = load_suite("robustness")
    ev = suite.evaluation
    assert len(ev) >= 24
    assert {s.world for s in ev} == {"planned", "dynamic"}
    assert {"poisson", "bursty", "azure-conv"} <= {s.arrivals for s in ev}
    assert min(s.load for s in ev) == 0.5 and max(s.load for s in ev) == 0.9
    workloads = {s.workload for s in ev}
    assert {"agentic-mix", "tool-heavy", "coordinator", "test-time-scaling"} <= workloads
    assert any(w.startswith("wfcommons:") for w in workloads)
    sizes = {len(suite.clusters[s.cluster].servers) for s in ev}
    assert min(sizes) < 16 < max(sizes)


def test_no_evaluation_mix_is_trained_or_selected_on() -> None:
    suite = load_suite("robustness")
    fitted = {mix_of(suite.clusters[s.cluster]) for s in (*suite.training, *suite.selection)}
    evaluated = {mix_of(suite.clusters[s.cluster]) for s in suite.evaluation}
    assert not fitted & evaluated
    # A mix is a composition, not a size: hetero-32 is hetero-16's mix.
    assert mix_of(suite.clusters["hetero-32"]) == mix_of(suite.clusters["hetero-16"])
    assert mix_of(suite.clusters["hetero-16"]) != mix_of(suite.clusters["h100-rich-16"])


def test_the_gpu_short_suite_holds_out_its_mixes_from_the_robustness_suite() -> None:
    """research/data/gpu-short-suite.yaml checks changes prompted by the robustness suite's
    rows on clusters short of GPUs: none of its evaluation mixes may appear there."""
    held = load_suite(str(ROOT / "research" / "data" / "gpu-short-suite.yaml"))
    robust = load_suite("robustness")
    every = (*robust.evaluation, *robust.training, *robust.selection)
    seen = {mix_of(robust.clusters[s.cluster]) for s in every}
    assert {s.world for s in held.evaluation} == {"dynamic"}
    assert not {mix_of(held.clusters[s.cluster]) for s in held.evaluation} & seen


def test_evaluation_seeds_are_never_training_or_selection_seeds() -> None:
    suite = load_suite("robustness")
    ev = set(suite.evaluation_seeds)
    assert not ev & set(suite.selection_seeds)
    assert max(ev) < min(suite.training_seeds_from, TRAIN_SEED_BASE)
    for path in sorted((ROOT / "configs" / "train").glob("*.yaml")):
        config = yaml.safe_load(path.read_text()) or {}
        assert not ev & set(config.get("validation_seeds") or []), path.name


def _edit(data: dict[str, Any], change: str) -> None:
    first = data["evaluation"][0]
    if change == "load":
        first["load"] = 1.5
    elif change == "cluster":
        first["cluster"] = "nowhere-16"
    elif change == "azure-length":
        first.update(arrivals="azure-conv", workflows=None)
    elif change == "shared-mix":
        data["selection"][0]["cluster"] = first["cluster"]
    elif change == "seed":
        data["seeds"]["evaluation"] = [1000]
    elif change == "name":
        data["training"][0]["name"] = first["name"]
    elif change == "server-type":
        data["clusters"]["one-fast-16"]["servers"][0]["type"] = "h900-x4"
    elif change == "extra-key":
        first["lod"] = 0.7
    elif change == "workload":
        first["workload"] = "agentic-mx"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("load", "evaluation[0].load"),
        ("cluster", "evaluation[0].cluster"),
        ("azure-length", "evaluation[0].workflows"),
        ("shared-mix", "evaluation[0].cluster"),
        ("seed", "seeds.evaluation"),
        ("name", "training[0].name"),
        ("server-type", "clusters.one-fast-16.servers[0].type"),
        ("extra-key", "evaluation[0].lod"),
        ("workload", "evaluation[0].workload"),
    ],
)
def test_a_bad_suite_file_is_one_line_naming_the_field(
    tmp_path: Path, change: str, field: str
) -> None:
    data = copy.deepcopy(shipped())
    _edit(data, change)
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as err:
        load_suite(str(path))
    assert err.value.field == field and err.value.source == str(path)
    assert "\n" not in str(err.value)


def test_the_command_line_says_it_in_one_line(tmp_path: Path) -> None:
    data = shipped()
    data["evaluation"][0]["load"] = 1.5
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["eval", "--suite", str(path), "--out", str(tmp_path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "evaluation[0].load" in lines[0], result.stderr


def test_settings_are_picked_by_name_and_training_ones_refused() -> None:
    suite = load_suite("robustness")
    names = [s.name for s in suite.pick("examplelab-mix-p07-planned,hetero16-mix-p07-planned")]
    assert names == ["hetero16-mix-p07-planned", "examplelab-mix-p07-planned"]  # suite order
    with pytest.raises(InputError, match="a training setting, not in this set"):
        suite.pick(suite.training[0].name)
    with pytest.raises(InputError, match="--settings"):
        suite.pick("no-such-setting")


def test_selection_settings_are_picked_apart_from_the_evaluation_ones() -> None:
    suite = load_suite("robustness")
    assert suite.pick(None, "selection") == suite.selection
    with pytest.raises(InputError, match="an evaluation setting, not in this set"):
        suite.pick(suite.evaluation[0].name, "selection")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--settings", "hetero16-mix-p07-planned"], "--settings: names settings of a suite"),
        (["--suite", "robustness", "--seeds", "5"], "--seeds: with --suite, a count from 1 to 3"),
        (["--selection"], "--selection: names settings of a suite"),
        (
            ["--suite", "robustness", "--selection", "--seeds", "4"],
            "of the suite's selection seeds 1000, 1001, 1002",
        ),
        (["--suite", "robustness", "--clusters", "hetero-16"], "--clusters: not with --suite"),
        (
            ["--suite", "robustness", "--workflows", "8000"],
            "--workflows: not with --suite: its runs grow to --precision",
        ),
        (["--suite", "robustness", "--load", "0.9"], "--load: not with --suite"),
        (["--suite", "robustness", "--nodes", "16"], "--nodes: not with --suite"),
        (["--suite", "robustness", "--kv-policy", "lru"], "--kv-policy: not with --suite"),
        (["--suite", "nosuch"], "--suite: 'nosuch': no such suite"),
    ],
)
def test_suite_options_are_refused_in_one_line(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    result = CliRunner().invoke(app, ["eval", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
