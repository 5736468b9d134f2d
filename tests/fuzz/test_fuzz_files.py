"""Mutated workflow, cluster, replay and training-config files through the CLI."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from fuzzing import (
    HOSTILE,
    ROOT,
    check_cli,
    corrupted_text,
    dump_json,
    dump_yaml,
    fuzz_settings,
    mutated_tree,
    write,
)
from hypothesis import given
from hypothesis import strategies as st

WORKFLOWS = {
    name: json.loads((ROOT / "configs" / "workflows" / name).read_text())
    for name in ("support-agent.json", "wfcommons-blast-small.json")
}
CLUSTER = yaml.safe_load((ROOT / "configs" / "clusters" / "example-lab.yaml").read_text())
TRAIN = yaml.safe_load((ROOT / "configs" / "train" / "scale-n16.yaml").read_text())
RUN = ["--workflows", "3", "--rate", "0.5", "--json"]


@st.composite
def workflow_file(draw: st.DrawFn) -> bytes:
    doc = WORKFLOWS[draw(st.sampled_from(sorted(WORKFLOWS)))]
    return draw(corrupted_text(dump_json(draw(mutated_tree(doc)))))


@given(data=workflow_file(), cluster=st.sampled_from(["hetero-4", "homogeneous-2:cpu-64c"]))
@fuzz_settings(share=1.5)
def test_mutated_workflow_files(data: bytes, cluster: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), "wf.json", data)
        check_cli("simulate", "--workload", str(path), "--cluster", cluster, *RUN)
        check_cli("validate", str(path))


@st.composite
def cluster_file(draw: st.DrawFn) -> bytes:
    text = dump_yaml(draw(mutated_tree(CLUSTER)))
    if draw(st.booleans()):  # a duplicate top-level key, which YAML would silently merge
        text += f"name: {draw(st.text(max_size=5))!r}\n"
    return draw(corrupted_text(text))


@given(data=cluster_file())
@fuzz_settings(share=1.0)
def test_mutated_cluster_files(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), "c.yaml", data)
        check_cli("simulate", "--cluster", str(path), "--workload", "react", *RUN)
        check_cli("validate", str(path))


REPLAY_VALUES = st.one_of(
    st.floats(min_value=0, max_value=100),
    HOSTILE,
    st.sampled_from(["1e17", "1e308", "-1", "nan", "inf", "", "#", "x,y", "0x10"]),
)


@given(
    values=st.lists(REPLAY_VALUES, max_size=12),
    header=st.sampled_from(["", "arrival\n", "time,other\n", "t;x\n"]),
    sort=st.booleans(),
    workflows=st.integers(min_value=1, max_value=8),
)
@fuzz_settings(share=1.0)
def test_mutated_replay_files(values: list[Any], header: str, sort: bool, workflows: int) -> None:
    if sort:
        values = sorted(values, key=lambda v: v if isinstance(v, float | int) else 0)
    text = header + "".join(f"{v}\n" for v in values)
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), "times.csv", text.encode())
        check_cli(
            "simulate",
            "--arrivals",
            f"replay:{path}",
            "--cluster",
            "hetero-4",
            "--workload",
            "react",
            "--workflows",
            str(workflows),
            "--rate",
            "1",
            "--json",
        )


@given(doc=mutated_tree(TRAIN), extra=st.booleans())
@fuzz_settings(share=0.7)
def test_mutated_training_configs(doc: Any, extra: bool) -> None:
    text = dump_yaml(doc)
    if extra:
        text += "total_steps: 5\n"  # a duplicate key
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), "train.yaml", text.encode())
        check_cli("validate", str(path))
