"""Hostile workflow and arrival files: every class ends in one InputError naming the file and
the JSON field, before anything large is built (docs/cluster-and-workload.md, "Limits")."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload import template as tpl
from scalesched.workload.arrivals import MAX_ARRIVAL_S, load_arrival_times
from scalesched.workload.wfformat import load_workflow_template

EXAMPLE = Path(__file__).parents[2] / "configs" / "workflows" / "support-agent.json"
BASE: dict[str, Any] = json.loads(EXAMPLE.read_text())
TASKS = "workflow.specification.tasks"
RULES = "workflow.scalesched.rules"


def load(tmp_path: Path, doc: Any, text: str | None = None) -> Any:
    path = tmp_path / "wf.json"
    path.write_text(text if text is not None else json.dumps(doc))
    return load_workflow_template(path)


def mutated(path: str, value: Any) -> dict[str, Any]:
    """BASE with the value at a dotted/indexed path replaced."""
    doc = copy.deepcopy(BASE)
    node: Any = doc
    parts = path.replace("[", ".").replace("]", "").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    node[int(last) if last.isdigit() else last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        # times: finite and at most MAX_SECONDS
        (f"{TASKS}[5].scalesched.cpuWork", 1e308, f"{TASKS}[5].scalesched.cpuWork"),
        (f"{TASKS}[5].scalesched.cpuWork", tpl.MAX_SECONDS * 2, f"{TASKS}[5].scalesched.cpuWork"),
        (f"{TASKS}[7].scalesched.extLatency", {"dist": "uniform", "lo": 0, "hi": 1e300}, "ext"),
        (
            f"{TASKS}[7].scalesched.extLatency",
            {"dist": "lognormal", "median": 1, "sigma": 1e300},
            "extLatency",
        ),
        # tokens: at most MAX_TOKENS, whatever the form
        (f"{TASKS}[4].scalesched.promptTokens", 10**308, "promptTokens"),
        (f"{TASKS}[4].scalesched.promptTokens", 1e308, "promptTokens"),
        (f"{TASKS}[4].scalesched.promptTokens", tpl.MAX_TOKENS + 1, "promptTokens"),
        (
            f"{TASKS}[4].scalesched.promptTokens",
            {"dist": "code_prompt", "scale": 1e300},
            "promptTokens",
        ),
        (f"{TASKS}[4].scalesched.promptTokens", {"dist": "code_prompt", "scale": 1e3}, "prompt"),
        # dynamic structure: widths and loop counts capped
        (f"{RULES}[0].width", 10**9, f"{RULES}[0].width"),
        (f"{RULES}[0].width", {"dist": "uniformInt", "lo": 1, "hi": 10**9}, f"{RULES}[0].width"),
        (f"{RULES}[1].maxIter", 10**9, f"{RULES}[1].maxIter"),
        # payloads
        ("workflow.specification.files[0].sizeInBytes", 1e300, "sizeInBytes"),
        (f"{RULES}[1].carryBytes", 1e300, "carryBytes"),
    ],
)
def test_sizes_beyond_the_limits_name_the_field(
    tmp_path: Path, path: str, value: Any, field: str
) -> None:
    start = time.perf_counter()
    with pytest.raises(InputError) as info:
        load(tmp_path, mutated(path, value))
    assert time.perf_counter() - start < 30  # guard: fails before building it
    text = str(info.value)
    assert str(tmp_path / "wf.json") in text and field in text, text
    assert "\n" not in text and len(text) < 400, text


def test_the_largest_realisation_is_bounded(tmp_path: Path) -> None:
    # each width within its cap, but 4096 copies of a 30-task body is too many tasks
    body = [f"b{i}" for i in range(30)]
    tasks = [{"id": "d", "scalesched": {"kind": "tool", "tool": "x", "cpuWork": 0.1}}]
    for i, tid in enumerate(body):
        parent = "d" if i == 0 else body[i - 1]
        tasks.append({"id": tid, "parents": [parent], "scalesched": {"kind": "tool", "tool": "x"}})
    rules = [{"type": "fanout", "decider": "d", "body": body, "width": tpl.MAX_FANOUT_WIDTH}]
    doc = {"workflow": {"specification": {"tasks": tasks}, "scalesched": {"rules": rules}}}
    start = time.perf_counter()
    with pytest.raises(InputError, match=r"rules: a realisation may have 122881 tasks"):
        load(tmp_path, doc)
    assert time.perf_counter() - start < 30  # guard: fails before building it
    # a loop fed by a wide fan-out: every copy feeds every iteration
    doc = mutated(f"{RULES}[0].width", 4000)
    doc["workflow"]["scalesched"]["rules"][1]["maxIter"] = 4000
    with pytest.raises(InputError, match=r"rules: a realisation may have \d+ edges"):
        load(tmp_path, doc)
    # just under the caps, realised, stays within them
    rules[0]["width"] = 3000
    wf = load(tmp_path, doc_with(tasks, rules)).realize(np.random.default_rng(0))
    assert len(wf.tasks) == 1 + 30 * 3000 <= tpl.MAX_REALISED_TASKS


def doc_with(tasks: list[dict[str, Any]], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"workflow": {"specification": {"tasks": tasks}, "scalesched": {"rules": rules}}}


def test_fan_out_into_fan_out_edges_are_bounded(tmp_path: Path) -> None:
    tasks = [
        {"id": "d", "scalesched": {"kind": "tool", "tool": "x", "cpuWork": 0.1}},
        {"id": "a", "parents": ["d"], "scalesched": {"kind": "tool", "tool": "x"}},
        {"id": "e", "parents": ["a"], "scalesched": {"kind": "tool", "tool": "x"}},
        {"id": "b", "parents": ["e", "a"], "scalesched": {"kind": "tool", "tool": "x"}},
    ]
    rules = [
        {"type": "fanout", "decider": "d", "body": ["a"], "width": 4000},
        {"type": "fanout", "decider": "e", "body": ["b"], "width": 4000},
    ]
    doc = {"workflow": {"specification": {"tasks": tasks}, "scalesched": {"rules": rules}}}
    with pytest.raises(InputError, match=r"rules: a realisation may have \d+ edges"):
        load(tmp_path, doc)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[" * 200_000 + "]" * 200_000, "json: nested too deeply"),
        ('{"name": "a", "name": "b"}', "name: duplicate key"),
        ('{"workflow": NaN}', "NaN is not a JSON number"),
        ('{"workflow": -Infinity}', "-Infinity is not a JSON number"),
        ('{"n": ' + "9" * 5000 + "}", "json: invalid JSON"),
        ('{"workflow": {"specification": {"tasks": [1e400]}}}', "expected a JSON object"),
    ],
)
def test_malformed_json_is_one_line(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle) as info:
        load(tmp_path, None, text)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_huge_integers_are_reported_short(tmp_path: Path) -> None:
    doc = mutated(f"{TASKS}[4].scalesched.promptTokens", -(10**400))
    with pytest.raises(InputError, match="an integer of 401 digits"):
        load(tmp_path, doc)
    doc = mutated(f"{TASKS}[5].scalesched.cpuWork", 10**400)
    with pytest.raises(InputError, match="cpuWork: expected a finite number"):
        load(tmp_path, doc)


def test_execution_records_are_bounded(tmp_path: Path) -> None:
    plain = {
        "workflow": {
            "specification": {"tasks": [{"id": "t"}]},
            "execution": {
                "machines": [{"nodeName": "m", "cpu": {"speedInMHz": 1e300}}],
                "tasks": [{"id": "t", "runtimeInSeconds": 1.0, "machines": ["m"]}],
            },
        }
    }
    with pytest.raises(InputError, match=r"machines\[0\]\.cpu\.speedInMHz: must be in"):
        load(tmp_path, plain)
    plain["workflow"]["execution"]["machines"][0]["cpu"]["speedInMHz"] = 2500  # type: ignore[index]
    plain["workflow"]["execution"]["tasks"][0]["runtimeInSeconds"] = 1e300  # type: ignore[index]
    with pytest.raises(InputError, match=r"tasks\[0\]\.runtimeInSeconds: must be <= 1e\+07"):
        load(tmp_path, plain)


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (["0", "1e17"], "line 2: must be a number in [0, 1e+09] s"),
        (["0", "inf"], "line 2: must be a number"),
        (["0", "nan"], "line 2: must be a number"),
        (["1", "0"], "line 2: times must be sorted"),
        (["t", "x"], "line 2: not a number"),
    ],
)
def test_replay_files_are_checked(tmp_path: Path, lines: list[str], needle: str) -> None:
    path = tmp_path / "times.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        load_arrival_times(path)
    assert needle in str(info.value) and str(path) in str(info.value)
    assert MAX_ARRIVAL_S == 1e9


def test_a_run_holds_at_most_a_million_tasks(tmp_path: Path) -> None:
    """Each workflow within its caps, but 200 of 98 305 tasks each: fail before realising."""
    from scalesched.workload.source import MAX_RUN_TASKS, get_workload, sample_jobs

    body = [f"b{i}" for i in range(24)]
    tasks = [{"id": "d", "scalesched": {"kind": "tool", "tool": "x", "cpuWork": 0.1}}]
    for i, tid in enumerate(body):
        parent = "d" if i == 0 else body[i - 1]
        tasks.append({"id": tid, "parents": [parent], "scalesched": {"kind": "tool", "tool": "x"}})
    rules = [{"type": "fanout", "decider": "d", "body": body, "width": tpl.MAX_FANOUT_WIDTH}]
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(doc_with(tasks, rules)))
    source = get_workload(str(path))
    realised = 0
    sample = source.sample

    def counting(rng: np.random.Generator) -> Any:
        nonlocal realised
        realised += 1
        return sample(rng)

    source.sample = counting  # type: ignore[method-assign]
    with pytest.raises(InputError, match=r"--workflows: 200 workflows of 'wide' would hold"):
        sample_jobs(source, [float(i) for i in range(200)], 0)
    assert realised == 1  # one workflow realised, not two hundred
    assert MAX_RUN_TASKS == 1_000_000
    # a small workload is far from the cap
    assert len(sample_jobs(get_workload("react"), [0.0] * 50, 0)) == 50
