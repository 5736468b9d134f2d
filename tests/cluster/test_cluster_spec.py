"""Server catalog, presets and cluster files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalesched.cluster import (
    SERVER_TYPES,
    ClusterSpec,
    can_host,
    cluster_file_schema,
    cluster_to_yaml,
    get_cluster,
    list_cluster_presets,
    list_server_types,
    load_cluster_file,
)
from scalesched.cluster.spec import HETERO_TYPES, cluster_schema_json
from scalesched.errors import InputError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "configs" / "clusters" / "example-lab.yaml"


def test_catalog():
    for gpu in ("h100-80g", "a100-80g", "a40-48g", "l40s-48g", "l4-24g"):
        for n in (1, 2, 4, 8):
            t = SERVER_TYPES[f"{gpu}-x{n}"]
            assert t.gpus == n and t.gpu_type is not None
            assert (t.cpu_cores, t.core_speed, t.nic_gbps, t.load_gbs) == (32, 1.0, 100.0, 8.0)
    for key, cores in (("cpu-32c", 32), ("cpu-64c", 64)):
        t = SERVER_TYPES[key]
        assert (t.gpu_type, t.gpus, t.cpu_cores, t.nic_gbps, t.load_gbs) == (
            None,
            0,
            cores,
            25.0,
            0,
        )
    listed = list_server_types()
    assert [k for k, _ in listed] == list(SERVER_TYPES)
    assert all(d and "\n" not in d for _, d in listed)
    assert [p for p, _ in list_cluster_presets()] == [
        "hetero-N",
        "homogeneous-N",
        "homogeneous-N:TYPE",
    ]


@pytest.mark.parametrize("n", [*range(1, 65), 1024])
def test_hetero_counts(n):
    c = get_cluster(f"hetero-{n}")
    assert isinstance(c, ClusterSpec) and len(c) == n and c.name == f"hetero-{n}"
    for i, t in enumerate(HETERO_TYPES):
        assert sum(s.type == t for s in c.servers) == n // 4 + (1 if i < n % 4 else 0)
    for p, s in enumerate(c.servers):
        assert s.type == HETERO_TYPES[p % 4] and s.name == f"{s.type}-{p // 4}"
    assert len({s.name for s in c.servers}) == n


def test_hetero_prefix_and_large():
    big = get_cluster("hetero-4096")
    assert len(big) == 4096
    assert get_cluster("hetero-37").servers == big.servers[:37]


def test_homogeneous():
    c = get_cluster("homogeneous-3")
    assert [s.name for s in c.servers] == [f"a100-80g-x4-{i}" for i in range(3)]
    c = get_cluster("homogeneous-8:h100-80g-x8")
    assert len(c) == 8 and all(s.gpus == 8 and s.gpu_type == "H100-80G" for s in c.servers)
    assert get_cluster("homogeneous-2:cpu-32c").servers[1].name == "cpu-32c-1"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("hetero-0", "N"),
        ("hetero-x", "N"),
        ("hetero--1", "N"),
        ("hetero-", "N"),
        ("homogeneous-0:a100-80g-x4", "N"),
        ("homogeneous-2:nope", "TYPE"),
        ("hetero-2:h100-80g-x4", "TYPE"),
        ("mystery", "cluster"),
        ("no/such/file.yaml", "(file)"),
    ],
)
def test_bad_presets(spec, field):
    with pytest.raises(InputError) as e:
        get_cluster(spec)
    assert e.value.source == spec and e.value.field == field
    assert "\n" not in str(e.value)


def test_example_file_and_round_trip(tmp_path):
    c = get_cluster(str(EXAMPLE))
    assert c.name == "example-lab" and c.network_latency_s == 0.0001
    big = [s for s in c.servers if s.type == "big-cpu"]
    assert len(big) == 1 and big[0].cpu_cores == 96 and big[0].core_speed == 1.2
    assert big[0].gpu_type is None and big[0].load_gbs == 0.0
    assert len({s.name for s in c.servers}) == len(c)
    for cluster in (c, get_cluster("hetero-7"), get_cluster("homogeneous-3:l4-24g-x2")):
        path = tmp_path / f"{cluster.name}.yaml"
        path.write_text(cluster_to_yaml(cluster))
        again = load_cluster_file(path)
        assert again == ClusterSpec(cluster.name, cluster.servers, cluster.network_latency_s)


def test_custom_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: lab\nservers:\n"
        "  - {type: h100-80g-x4, name: fast, cpu_cores: 64, count: 2}\n"
        "  - {name: gpu-box, gpu_type: L4-24G, gpus: 2, cpu_cores: 16}\n"
        "  - {name: gpu-box, gpu_type: L4-24G, gpus: 2, cpu_cores: 16}\n"
    )
    c = get_cluster(path)
    assert [s.name for s in c.servers] == ["fast-0", "fast-1", "gpu-box-0", "gpu-box-1"]
    assert c.servers[0].type == "h100-80g-x4" and c.servers[0].cpu_cores == 64
    assert c.servers[2].nic_gbps == 100.0 and c.servers[2].load_gbs == 8.0
    assert c.network_latency_s == ClusterSpec("x", ()).network_latency_s
    again = tmp_path / "again.yaml"
    again.write_text(cluster_to_yaml(c))
    assert load_cluster_file(again) == c


GOOD = "  - {type: cpu-32c}\n"
BAD_FILES = [
    ("name: x\nservers:\n" + GOOD + "  - {type: x}\n", "servers[1].type", "unknown server type"),
    (
        "name: x\nservers:\n  - {name: b, gpu_type: V100, gpus: 1, cpu_cores: 8}\n",
        "servers[0].gpu_type",
        "unknown GPU type",
    ),
    (
        "name: x\nservers:\n  - {name: b, gpus: 4, cpu_cores: 8}\n",
        "servers[0].gpu_type",
        "needs a gpu_type",
    ),
    (
        "name: x\nservers:\n  - {name: b, gpu_type: L4-24G, cpu_cores: 8}\n",
        "servers[0].gpus",
        "gpus >= 1",
    ),
    ("name: x\nservers:\n  - {type: cpu-32c, count: 0}\n", "servers[0].count", "greater"),
    ("name: x\nservers:\n  - {type: cpu-32c, count: -2}\n", "servers[0].count", "greater"),
    ("name: x\nservers:\n  - {type: cpu-32c, count: 1.5}\n", "servers[0].count", "integer"),
    (
        "name: x\nservers:\n" + GOOD + "  - {type: cpu-32c, cpu_cores: 0}\n",
        "servers[1].cpu_cores",
        "greater",
    ),
    (
        "name: x\nservers:\n  - {name: b, cpu_cores: 4, core_speed: -1}\n",
        "servers[0].core_speed",
        "greater",
    ),
    (
        "name: x\nservers:\n  - {name: b, cpu_cores: 4, core_speed: 0}\n",
        "servers[0].core_speed",
        "greater",
    ),
    (
        "name: x\nservers:\n  - {name: b, cpu_cores: 4, nic_gbps: 0}\n",
        "servers[0].nic_gbps",
        "greater",
    ),
    (
        "name: x\nservers:\n  - {name: b, cpu_cores: 4, core_speed: fast}\n",
        "servers[0].core_speed",
        "number",
    ),
    ("name: x\nservers:\n  - {name: b}\n", "servers[0].cpu_cores", "required"),
    ("name: x\nservers:\n  - {cpu_cores: 4}\n", "servers[0].type", "custom `name`"),
    ("name: x\nservers:\n  - {name: cpu-64c, cpu_cores: 4}\n", "servers[0].name", "catalog"),
    ("name: x\nservers:\n  - {type: cpu-64c, gpus: 2}\n", "servers[0].gpus", "set by"),
    (
        "name: x\nservers:\n  - {name: b, gpu_type: L4-24G, gpus: 1, cpu_cores: 4, load_gbs: 0}\n",
        "servers[0].load_gbs",
        "load_gbs > 0",
    ),
    ("name: x\nservers:\n  - {type: cpu-32c, colour: red}\n", "servers[0].colour", "Extra"),
    ("name: x\nsize: 3\nservers:\n" + GOOD, "size", "Extra"),
    ("name: x\nnetwork_latency_s: -1\nservers:\n" + GOOD, "network_latency_s", "greater"),
    ("name: x\nservers: []\n", "servers", "at least 1"),
    ("servers:\n" + GOOD, "name", "required"),
    ("name: x\nservers:\n  - {type: cpu-32c\n", "(file)", "malformed YAML: line"),
    ("- just\n- a list\n", "(file)", "mapping"),
    ("", "(file)", "mapping"),
]


@pytest.mark.parametrize(("text", "field", "words"), BAD_FILES)
def test_bad_cluster_files(tmp_path, text, field, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        get_cluster(str(path))
    err = e.value
    assert err.source == str(path) and err.field == field, str(err)
    assert words in err.message and "\n" not in str(err)
    assert str(path) in str(err) and field in str(err)


def test_missing_file(tmp_path):
    with pytest.raises(InputError) as e:
        load_cluster_file(tmp_path / "absent.yaml")
    assert e.value.field == "(file)" and "no such" in e.value.message


def test_schema_file_is_current():
    committed = (REPO / "docs" / "cluster-schema.json").read_text()
    assert committed == cluster_schema_json(), (
        "docs/cluster-schema.json is stale: python -m scalesched.cluster > docs/cluster-schema.json"
    )
    assert json.loads(committed) == cluster_file_schema()


def test_can_host():
    s = {k: t.instance(0) for k, t in SERVER_TYPES.items()}
    assert not can_host(s["cpu-64c"], "phi-2")
    assert can_host(s["l4-24g-x1"], "llama-2-7b")
    assert not can_host(s["l4-24g-x4"], "llama-2-70b")
    assert can_host(s["l4-24g-x8"], "llama-2-70b")
    assert can_host(s["l4-24g-x4"], "codellama-34b")
    assert not can_host(s["h100-80g-x1"], "llama-2-70b")
    assert can_host(s["h100-80g-x2"], "llama-2-70b")


def test_package_data_needs_no_shared_dir():
    """Import and use everything with every open() under a shared/data dir refused."""
    code = (
        "import sys\n"
        "def hook(event, args):\n"
        "    if event == 'open' and 'shared/data' in str(args[0]):\n"
        "        raise RuntimeError('read ' + str(args[0]))\n"
        "sys.addaudithook(hook)\n"
        "import numpy as np\n"
        "from scalesched.cluster import get_cluster, engine_perf\n"
        "from scalesched.workload.tokens import TOKEN_DISTS\n"
        "get_cluster('hetero-8')\n"
        "assert engine_perf('llama-2-70b', 'L4-24G', 8).prefill_s(100) > 0\n"
        "assert TOKEN_DISTS['conv_prompt'].sample(np.random.default_rng(0)) >= 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")
