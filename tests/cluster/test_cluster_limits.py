"""Hostile cluster files: size caps before anything is built, strict YAML."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.spec import MAX_PRESET_SERVERS
from scalesched.errors import InputError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("counts", "at"), [([1_000_000_000], 0), ([MAX_PRESET_SERVERS, 1], 1), ([2**62, 2**62], 0)]
)
def test_total_server_count_is_capped_like_presets(
    tmp_path: Path, counts: list[int], at: int
) -> None:
    groups = "".join(f"  - type: cpu-64c\n    count: {n}\n" for n in counts)
    path = write(tmp_path, f"name: x\nservers:\n{groups}")
    start = time.perf_counter()
    with pytest.raises(InputError, match=rf"servers\[{at}\]\.count: .*at most"):
        get_cluster(str(path))
    assert time.perf_counter() - start < 2  # failed before building a single server
    with pytest.raises(InputError, match="at most"):
        get_cluster(f"hetero-{MAX_PRESET_SERVERS + 1}")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: x\nservers:\n  - type: cpu-64c\nservers:\n  - type: l4-24g-x4\n", "servers: dup"),
        ("name: x\nservers:\n  - type: cpu-64c\n    count: 2\n    count: 3\n", "count: dup"),
        ("name: x\nname: y\nservers: [{type: cpu-64c}]\n", "name: duplicate key at line 2"),
        ("[" * 100_000, "nested more than 200 levels deep"),
        ("name: x\nnetwork_latency_s: .nan\nservers: [{type: cpu-64c}]\n", "network_latency_s"),
        ("name: x\nservers: [{type: cpu-64c, core_speed: .inf}]\n", "core_speed"),
    ],
    ids=["dup-list", "dup-count", "dup-name", "deep", "nan", "inf"],
)
def test_strict_yaml(tmp_path: Path, text: str, needle: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InputError, match=needle) as info:
        get_cluster(str(write(tmp_path, text)))
    assert "\n" not in str(info.value)
    assert time.perf_counter() - start < 2  # PyYAML alone scans 100k levels for minutes


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("type: cpu-64c, core_speed: 1.0e-300", "core_speed"),
        ("type: cpu-64c, core_speed: 1.0e+300", "core_speed"),
        ("type: cpu-64c, nic_gbps: 1.0e-300", "nic_gbps"),
        ("type: cpu-64c, cpu_cores: 1000000000000", "cpu_cores"),
        ("type: h100-80g-x4, load_gbs: 1.0e-300", "load_gbs"),
        ("type: h100-80g-x4, load_gbs: 0.0", "load_gbs"),
        ("type: h100-80g-x4, load_gbs: 1.0e+300", "load_gbs"),
    ],
)
def test_server_numbers_stay_in_documented_ranges(tmp_path: Path, entry: str, field: str) -> None:
    """Values that used to run and report response times of 1e300 s."""
    path = write(tmp_path, f"name: x\nservers:\n  - {{{entry}}}\n")
    with pytest.raises(InputError, match=rf"servers\[0\]\.{field}: "):
        get_cluster(str(path))


def test_network_latency_is_bounded(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nnetwork_latency_s: 1.0e+300\nservers: [{type: cpu-64c}]\n")
    with pytest.raises(InputError, match="network_latency_s: Input should be less than or equal"):
        get_cluster(str(path))
