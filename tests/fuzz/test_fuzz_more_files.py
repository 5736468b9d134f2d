"""Mutated gateway backends files, deployment files and capacity caches: each one loads
into something valid or is refused with one ``InputError`` line naming the file; a damaged
capacity cache never stops a run (the figure comes from the shipped table instead)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzzing import HOSTILE, corrupted_text, fuzz_settings, mutated_tree, write
from hypothesis import given
from hypothesis import strategies as st

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import load_deployment_file
from scalesched.cluster.endpoints import load_backends_file
from scalesched.errors import InputError
from scalesched.runs import capacity as cap

BACKENDS: dict[str, Any] = {
    "backends": [
        {
            "name": "h100-0",
            "server_type": "h100-80g-x4",
            "models": {"meta-llama/Llama-2-7b-chat-hf": "llama-2-7b", "phi": "phi-2"},
            "endpoint": {"base_url": "http://127.0.0.1:18000/v1", "timeout_s": 30},
        },
        {
            "name": "l4-0",
            "server_type": "l4-24g-x1",
            "models": {"phi": "phi-2"},
            "endpoint": {"base_url": "http://127.0.0.1:18001/v1"},
        },
    ]
}
DEPLOYMENT: dict[str, Any] = {
    "name": "t",
    "replicas": [
        {"model": "llama-2-7b", "server": "h100-80g-x4-0", "gpus": [0], "share": "1/2"},
        {"model": "llama-2-70b", "server": "h100-80g-x4-0", "gpus": [2, 3], "share": 1.0},
        {"model": "phi-2", "server": "a100-80g-x4-0", "gpus": [1], "share": 0.25},
    ],
}
CLUSTER = get_cluster("hetero-8")


def _as_file(doc: Any, corrupt: bool, data: st.DataObject) -> bytes:
    """A mutated document as YAML, its text corrupted too when ``corrupt``."""
    text = yaml.safe_dump(doc, allow_unicode=True)
    return data.draw(corrupted_text(text)) if corrupt else text.encode()


def _one_line_naming(exc: InputError, path: Path) -> None:
    text = str(exc)
    assert "\n" not in text and str(path) in text, text


@given(doc=mutated_tree(BACKENDS), corrupt=st.booleans(), data=st.data())
@fuzz_settings(share=0.5)
def test_mutated_backends_files(doc: Any, corrupt: bool, data: st.DataObject) -> None:
    raw = _as_file(doc, corrupt, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), "backends.yaml", raw)
        try:
            backends = load_backends_file(str(path))
        except InputError as exc:
            _one_line_naming(exc, path)
        else:
            assert backends and all(b.models for b in backends)
            assert all(0 < b.endpoint.timeout_s < math.inf for b in backends)


@given(doc=mutated_tree(DEPLOYMENT), corrupt=st.booleans(), data=st.data())
@fuzz_settings(share=0.5)
def test_mutated_deployment_files(doc: Any, corrupt: bool, data: st.DataObject) -> None:
    raw = _as_file(doc, corrupt, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), "deployment.yaml", raw)
        try:
            deployment = load_deployment_file(path, CLUSTER)
        except InputError as exc:
            _one_line_naming(exc, path)
        else:
            assert 0 < deployment.gpus_used <= sum(s.gpus for s in CLUSTER.servers)


@given(value=HOSTILE, corrupt=st.booleans(), data=st.data())
@fuzz_settings(share=0.5)
def test_a_damaged_capacity_cache_never_stops_a_run(
    value: Any, corrupt: bool, data: st.DataObject
) -> None:
    spec = get_cluster("hetero-16")
    shipped = cap.capacity_wps(spec, "agentic-mix")  # the shipped table holds hetero-16
    key = cap.cache_key(spec, "agentic-mix")
    entry = {"capacity_wps": value, "cluster": "hetero-16", "workload": "agentic-mix"}
    text = json.dumps({key: entry}, default=str)
    raw = data.draw(corrupted_text(text)) if corrupt else text.encode()
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        write(Path(tmp), "capacity.json", raw)
        mp.setenv("SCALESCHED_CACHE_DIR", tmp)
        mp.setattr(cap, "_memory", {})
        got = cap.capacity_wps(spec, "agentic-mix")
    assert math.isfinite(got) and got > 0
    assert got == shipped or got == entry["capacity_wps"]


def test_the_fuzz_cache_dir_is_ours() -> None:
    """The test above points the cache at its own folder: the user's is never touched."""
    assert "SCALESCHED_CACHE_DIR" in os.environ  # set for the whole suite (tests/conftest.py)
