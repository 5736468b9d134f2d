"""Network files for ``scalesched static --network``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalesched.errors import InputError
from scalesched.static import build_problem, load_network
from scalesched.static.io import network_from_dict

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "networks" / "example-4.yaml"


def test_shipped_example_loads() -> None:
    net = load_network(EXAMPLE)
    assert list(net.nodes) == ["fast-0", "fast-1", "mid-0", "slow-0"]
    assert net.nodes["slow-0"]["weight"] == 0.5
    assert net.edges["fast-0", "fast-1"]["weight"] == 1.25e9
    assert net.number_of_edges() == 6


def test_links_with_a_default_and_json(tmp_path: Path) -> None:
    doc = {
        "nodes": [{"name": "a", "speed": 1}, {"name": "b", "speed": 2}, {"name": "c", "speed": 3}],
        "links": [{"between": ["a", "b"], "bandwidth": "1.0e8"}],
        "default_bandwidth": 5e8,
    }
    path = tmp_path / "net.json"
    path.write_text(json.dumps(doc))
    net = load_network(path)
    assert net.edges["a", "b"]["weight"] == 1e8  # YAML 1.1 style strings are read as numbers
    assert net.edges["b", "c"]["weight"] == 5e8
    assert build_problem_ok(net)


def build_problem_ok(net: object) -> bool:
    import networkx as nx

    tg = nx.DiGraph()
    tg.add_node("t", weight=1.0)
    build_problem(tg, net)  # type: ignore[arg-type]
    return True


def test_a_single_node_needs_no_links() -> None:
    net = network_from_dict({"nodes": [{"name": "solo", "speed": 1.5}]})
    assert list(net.nodes) == ["solo"]


BASE_NODES = [{"name": "a", "speed": 1.0}, {"name": "b", "speed": 2.0}]


@pytest.mark.parametrize(
    ("doc", "field", "needle"),
    [
        ([], "(file)", "expected a mapping"),
        ({"nodes": []}, "nodes", "non-empty"),
        ({"nodes": BASE_NODES, "bandwidth": [[0, 1], [1, 0]], "extra": 1}, "extra", "unknown"),
        ({"nodes": [{"name": "a", "speed": -1}], "links": []}, "nodes[0].speed", "positive"),
        ({"nodes": [{"name": "a"}]}, "nodes[0].speed", "missing"),
        (
            {
                "nodes": [{"name": "a", "speed": 1}, {"name": "a", "speed": 1}],
                "bandwidth": [[0, 1], [1, 0]],
            },
            "nodes[1].name",
            "duplicate",
        ),
        ({"nodes": BASE_NODES}, "bandwidth", "either"),
        ({"nodes": BASE_NODES, "bandwidth": [[0, 1]]}, "bandwidth", "2 rows"),
        ({"nodes": BASE_NODES, "bandwidth": [[0, 1], [2, 0]]}, "bandwidth[1][0]", "symmetric"),
        ({"nodes": BASE_NODES, "bandwidth": [[0, 0], [0, 0]]}, "bandwidth[0][1]", "positive"),
        (
            {"nodes": BASE_NODES, "links": [{"between": ["a", "z"], "bandwidth": 1}]},
            "links[0].between",
            "unknown node 'z'",
        ),
        ({"nodes": BASE_NODES, "links": []}, "links", "no link between 'a' and 'b'"),
        (
            {
                "nodes": BASE_NODES,
                "links": [
                    {"between": ["a", "b"], "bandwidth": 1},
                    {"between": ["b", "a"], "bandwidth": 2},
                ],
            },
            "links[1].between",
            "second link",
        ),
        (
            {"nodes": BASE_NODES, "bandwidth": [[0, 1], [1, 0]], "default_bandwidth": 1},
            "default_bandwidth",
            "only goes with links",
        ),
    ],
)
def test_bad_network_files_name_the_field(doc: object, field: str, needle: str) -> None:
    with pytest.raises(InputError) as ei:
        network_from_dict(doc, "net.yaml")
    assert ei.value.source == "net.yaml"
    assert ei.value.field == field
    assert needle in ei.value.message


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_network(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n")
    with pytest.raises(InputError, match="malformed YAML: line 2"):
        load_network(bad)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{")
    with pytest.raises(InputError, match="invalid JSON"):
        load_network(bad_json)
