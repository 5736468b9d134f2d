"""Reading the static problem from files: network files and workflows as task graphs.

A network file (YAML or JSON) lists the nodes with their speeds and gives the bandwidth of
every pair of nodes, either as a full matrix or as links::

    name: four-nodes            # optional
    nodes:
      - {name: fast, speed: 2.0}        # speed: x a speed-1.0 core (cost / speed = seconds)
      - {name: slow, speed: 0.5}
    bandwidth:                  # bytes/s, symmetric, rows and columns in node order;
      - [0, 1.25e9]             # the diagonal is ignored (a transfer on one node is free)
      - [1.25e9, 0]
    # or, instead of the matrix:
    links:
      - {between: [fast, slow], bandwidth: 1.25e9}
    default_bandwidth: 1.25e9   # optional, for pairs no link names

Every problem is an :class:`~scalesched.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import networkx as nx

from scalesched.errors import InputError, parse_json, parse_yaml
from scalesched.workload.instance import WorkflowInstance

_NODE_KEYS = {"name", "speed"}
_TOP_KEYS = {"name", "nodes", "bandwidth", "links", "default_bandwidth"}


def _num(v: Any, src: str, field: str, *, allow_inf: bool = False) -> float:
    if isinstance(v, str):  # YAML 1.1 reads 1.0e8 (no sign in the exponent) as a string
        try:
            v = float(v)
        except ValueError:
            raise InputError(src, field, f"expected a number, got {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(src, field, f"expected a number, got {v!r}")
    x = float(v)
    if math.isnan(x) or (math.isinf(x) and not allow_inf) or x <= 0:
        raise InputError(src, field, f"must be a positive number, got {v!r}")
    return x


def network_from_dict(data: Any, source: str = "network") -> nx.Graph:
    """Validate a parsed network file (see the module docstring) into a networkx graph."""
    if not isinstance(data, dict):
        raise InputError(source, "(file)", "expected a mapping with nodes and bandwidth or links")
    extra = sorted(set(data) - _TOP_KEYS, key=str)
    if extra:
        raise InputError(
            source, str(extra[0]), f"unknown field; known: {', '.join(sorted(_TOP_KEYS))}"
        )
    g = nx.Graph(name=str(data.get("name", Path(source).stem)))
    names = _add_nodes(g, data.get("nodes"), source)
    has_matrix, has_links = "bandwidth" in data, "links" in data
    if has_matrix == has_links and len(names) > 1:
        raise InputError(source, "bandwidth", "give either a bandwidth matrix or links")
    if has_matrix:
        if "default_bandwidth" in data:
            raise InputError(source, "default_bandwidth", "only goes with links")
        _add_matrix(g, names, data["bandwidth"], source)
    elif has_links:
        _add_links(g, names, data["links"], data.get("default_bandwidth"), source)
    return g


def _add_nodes(g: nx.Graph, raw_nodes: Any, source: str) -> list[str]:
    """The nodes, each a unique name and a positive speed; returns the names in order."""
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InputError(source, "nodes", "expected a non-empty list of {name, speed}")
    names: list[str] = []
    for k, node in enumerate(raw_nodes):
        f = f"nodes[{k}]"
        if not isinstance(node, dict):
            raise InputError(source, f, "expected a mapping {name, speed}")
        extra = sorted(set(node) - _NODE_KEYS, key=str)
        if extra:
            raise InputError(source, f"{f}.{extra[0]}", "unknown field; known: name, speed")
        name = node.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(source, f"{f}.name", f"expected a non-empty string, got {name!r}")
        if name in g:
            raise InputError(source, f"{f}.name", f"duplicate node name {name!r}")
        if "speed" not in node:
            raise InputError(source, f"{f}.speed", "missing")
        g.add_node(name, weight=_num(node["speed"], source, f"{f}.speed"))
        names.append(name)
    return names


def _add_matrix(g: nx.Graph, names: list[str], m: Any, source: str) -> None:
    """Bandwidths from a full, symmetric n x n matrix (the diagonal is ignored)."""
    n = len(names)
    if not isinstance(m, list) or len(m) != n:
        raise InputError(source, "bandwidth", f"expected {n} rows (one per node)")
    for a, row in enumerate(m):
        if not isinstance(row, list) or len(row) != n:
            raise InputError(source, f"bandwidth[{a}]", f"expected {n} columns")
    for a in range(n):
        for b in range(a + 1, n):
            x = _num(m[a][b], source, f"bandwidth[{a}][{b}]", allow_inf=True)
            y = _num(m[b][a], source, f"bandwidth[{b}][{a}]", allow_inf=True)
            if x != y:
                raise InputError(
                    source,
                    f"bandwidth[{b}][{a}]",
                    f"the matrix must be symmetric: {y!r} != bandwidth[{a}][{b}] = {x!r}",
                )
            g.add_edge(names[a], names[b], weight=x)


def _add_links(g: nx.Graph, names: list[str], links: Any, default: Any, source: str) -> None:
    """Bandwidths from links between named nodes, ``default_bandwidth`` for the pairs no
    link names; every pair must end up with one."""
    if not isinstance(links, list):
        raise InputError(source, "links", "expected a list of {between: [a, b], bandwidth}")
    for k, link in enumerate(links):
        f = f"links[{k}]"
        if not isinstance(link, dict) or set(link) != {"between", "bandwidth"}:
            raise InputError(source, f, "expected exactly {between: [a, b], bandwidth}")
        pair = link["between"]
        if not isinstance(pair, list) or len(pair) != 2:
            raise InputError(source, f"{f}.between", "expected two node names")
        for end in pair:
            if end not in g:
                raise InputError(source, f"{f}.between", f"unknown node {end!r}")
        a, b = pair
        if a == b:
            raise InputError(source, f"{f}.between", "a link joins two different nodes")
        if g.has_edge(a, b):
            raise InputError(source, f"{f}.between", f"second link between {a!r} and {b!r}")
        g.add_edge(a, b, weight=_num(link["bandwidth"], source, f"{f}.bandwidth", allow_inf=True))
    n = len(names)
    if default is not None:
        bw = _num(default, source, "default_bandwidth", allow_inf=True)
        for a in range(n):
            for b in range(a + 1, n):
                if not g.has_edge(names[a], names[b]):
                    g.add_edge(names[a], names[b], weight=bw)
    for a in range(n):
        for b in range(a + 1, n):
            if not g.has_edge(names[a], names[b]):
                raise InputError(
                    source,
                    "links",
                    f"no link between {names[a]!r} and {names[b]!r} (add one or set "
                    "default_bandwidth)",
                )


def load_network(path: str | Path) -> nx.Graph:
    """Read a network file (YAML or JSON; see the module docstring)."""
    src = str(path)
    p = Path(path)
    if not p.is_file():
        raise InputError(src, "file", "no such file" if not p.exists() else "not a regular file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(src, "file", f"cannot read: {e}") from None
    data = parse_json(text, src) if p.suffix.lower() == ".json" else parse_yaml(text, src)
    return network_from_dict(data, src)


def task_graph_from_workflow(workflow: WorkflowInstance, source: str = "workflow") -> nx.DiGraph:
    """A realised workflow of CPU tool tasks as a SAGA-style task graph: node ``weight`` =
    ``cpu_work`` (core-seconds at speed 1.0), edge ``weight`` = payload bytes. External
    latency is not part of the static problem and is dropped; LLM tasks are refused."""
    g = nx.DiGraph(name=workflow.name)
    for t in workflow.tasks:
        if t.kind != "tool":
            raise InputError(
                source,
                f"tasks[{t.id}].kind",
                "static scheduling takes CPU tool tasks only (this one is an LLM call)",
            )
        g.add_node(t.id, weight=float(t.cpu_work))
    for v, ps in enumerate(workflow.parents):
        for u in ps:
            g.add_edge(
                workflow.tasks[u].id,
                workflow.tasks[v].id,
                weight=float(workflow.edge_bytes.get((u, v), 0.0)),
            )
    return g


def load_task_graph(spec: str, *, seed: int = 0, source: str = "--workflow") -> nx.DiGraph:
    """A task graph from a WfFormat file or a ``wfcommons:RECIPE:TASKS[:SEED]`` spec (a file
    with dynamic rules is realised with ``seed``)."""
    from scalesched.workload.source import WorkflowSource, get_workload, workflow_rng

    wsrc: WorkflowSource
    if spec.startswith("wfcommons:"):
        from scalesched.workload.wfcommons_gen import wfcommons_source

        wsrc = wfcommons_source(spec, source)
    else:
        p = Path(spec)
        if not p.exists() and p.suffix.lower() != ".json":
            raise InputError(
                source,
                "workflow",
                f"expected a WfFormat .json file or wfcommons:RECIPE:TASKS[:SEED], got {spec!r}",
            )
        wsrc = get_workload(spec)
    wf = wsrc.sample(workflow_rng(seed, 0))
    return task_graph_from_workflow(wf, spec)
