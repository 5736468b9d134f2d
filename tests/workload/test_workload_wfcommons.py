"""``--workload wfcommons:RECIPE:TASKS[:SEED]``: WfCommons recipes as workflow sources."""

from __future__ import annotations

import random
import socket
import sys

import numpy as np
import pytest
import wfcommons  # noqa: F401  (the dev extra installs it: fail, never skip, without it)
from conftest import check_instance
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.errors import InputError
from scalesched.workload import wfcommons_gen
from scalesched.workload.source import get_workload, list_workloads, sample_jobs, workflow_rng
from scalesched.workload.wfcommons_gen import (
    RECIPES,
    generate_document,
    generate_instance,
    min_tasks,
    parse_spec,
)

MINIMUMS = {
    "montage": 60,
    "epigenomics": 43,
    "blast": 45,
    "genome": 54,
    "cycles": 69,
    "soykb": 98,
    "srasearch": 24,
    "seismology": 103,
    "bwa": 106,
}


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_every_recipe_generates_at_its_minimum(recipe: str) -> None:
    assert min_tasks(recipe) == MINIMUMS[recipe]
    src = get_workload(f"wfcommons:{recipe}:{MINIMUMS[recipe]}")
    w = src.sample(np.random.default_rng(0))
    check_instance(w)
    assert 0 < len(w) <= MINIMUMS[recipe]
    assert w.pattern == f"wfcommons-{recipe}"
    assert all(t.kind == "tool" and t.cpu_work > 0 for t in w.tasks)
    assert all(t.tool and t.tool.startswith("wfcommons:") for t in w.tasks)


def test_runtimes_become_cpu_work_and_shared_files_edge_bytes() -> None:
    doc = generate_document("blast", 45, 4)
    spec = doc["workflow"]["specification"]
    size = {f["id"]: f["sizeInBytes"] for f in spec["files"]}
    runtime = {t["id"]: t["runtimeInSeconds"] for t in doc["workflow"]["execution"]["tasks"]}
    w = generate_instance("blast", 45, 4)
    index = {t.id: i for i, t in enumerate(w.tasks)}
    tasks = {t["id"]: t for t in spec["tasks"]}
    for t in w.tasks:
        assert t.cpu_work == runtime[t.id]
    checked = 0
    for tid, t in tasks.items():
        for parent in t.get("parents", []):
            shared = set(tasks[parent]["outputFiles"]) & set(t["inputFiles"])
            want = float(sum(size[f] for f in shared))
            assert w.edge_bytes.get((index[parent], index[tid]), 0.0) == want
            checked += 1
    assert checked == sum(len(p) for p in w.parents) > 0


def signature(recipe: str, tasks: int, seed: int) -> tuple:
    w = generate_instance(recipe, tasks, seed)
    return (
        tuple((t.id, t.cpu_work) for t in w.tasks),
        w.parents,
        tuple(sorted(w.edge_bytes.items())),
    )


def test_reproducible_per_seed_and_global_random_state_untouched() -> None:
    a = signature("montage", 60, 7)
    generate_instance.cache_clear()
    random.seed(123)
    np.random.seed(123)
    before = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    assert signature("montage", 60, 7) == a  # regenerated, same DAG and numbers
    assert (random.random(), np.random.random()) == before
    assert signature("montage", 60, 8) != a


def test_one_instance_per_spec_reused_for_every_draw() -> None:
    src = get_workload("wfcommons:srasearch:30:2")
    assert src.name == "wfcommons:srasearch:30:2"
    w1 = src.sample(np.random.default_rng(1))
    assert src.sample(np.random.default_rng(2)) is w1
    assert get_workload("wfcommons:srasearch:30").name == "wfcommons:srasearch:30:0"
    jobs = sample_jobs(src, [0.0, 1.0, 2.5], seed=0)
    assert [j.workflow.name for j in jobs] == [f"wfcommons-srasearch-{i}" for i in range(3)]
    assert all(j.workflow.tasks is w1.tasks for j in jobs)
    assert src.sample(workflow_rng(5, 9)) is w1


def test_generation_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    generate_instance.cache_clear()
    assert len(generate_instance("epigenomics", 43, 1)) > 0


@pytest.mark.parametrize(
    ("spec", "field", "needle"),
    [
        ("wfcommons:montage:59", "tasks", "needs TASKS >= 60"),
        ("wfcommons:bwa:100", "tasks", "needs TASKS >= 106"),
        ("wfcommons:montag:200", "recipe", "known: montage, epigenomics"),
        ("wfcommons:montage:lots", "tasks", "must be an integer"),
        ("wfcommons:montage:2.5", "tasks", "must be an integer"),
        ("wfcommons:montage:200:x", "seed", "must be an integer"),
        ("wfcommons:montage", "wfcommons", "expected wfcommons:RECIPE:TASKS[:SEED]"),
        ("wfcommons:montage:1:2:3", "wfcommons", "expected wfcommons:RECIPE:TASKS[:SEED]"),
        ("wfcommons:montage:10000000", "tasks", "at most"),
    ],
)
def test_bad_specs(spec: str, field: str, needle: str) -> None:
    with pytest.raises(InputError) as ei:
        get_workload(spec)
    assert ei.value.source == "--workload" and ei.value.field == field
    assert needle in ei.value.message


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wfcommons", None)  # import wfcommons -> ImportError
    with pytest.raises(InputError) as ei:
        parse_spec("wfcommons:montage:200")
    assert "pip install scalesched[wfcommons]" in ei.value.message


def test_listed_among_the_workloads() -> None:
    assert any(name.startswith("wfcommons:") for name, _ in list_workloads(families=True))
    assert all(not name.startswith("wfcommons:") for name, _ in list_workloads())
    assert wfcommons_gen.SPEC_FORM == "wfcommons:RECIPE:TASKS[:SEED]"


def test_simulate_and_eval_take_a_wfcommons_workload(tmp_path: object) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "simulate",
            "--workload",
            "wfcommons:srasearch:24",
            "--cluster",
            "hetero-4",
            "--workflows",
            "3",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert '"workflows_completed": 3' in result.stdout

    from scalesched.eval.study import StudyConfig, run_study

    cfg = StudyConfig(
        policies=("eft", "random"),
        nodes=(4,),
        seeds=(0,),
        workflows=3,
        workload="wfcommons:srasearch:24",
    )
    rows = run_study(cfg, executor="serial")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert rows[0]["tasks_completed"] == rows[1]["tasks_completed"] == 3 * 22
