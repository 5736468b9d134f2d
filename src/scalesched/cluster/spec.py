"""Cluster files (YAML, validated with pydantic) and cluster presets.

``get_cluster(spec)`` accepts a preset name (``hetero-N``, ``homogeneous-N``,
``homogeneous-N:TYPE``) or the path of a YAML cluster file; every bad input raises
``InputError`` naming the file or preset and the field.  The schema of the file format is
``cluster_file_schema()``, committed as docs/cluster-schema.json
(regenerate: ``python -m scalesched.cluster > docs/cluster-schema.json``).
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from scalesched.cluster.catalog import SERVER_TYPES, ServerType
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.perf import GPU_TYPES
from scalesched.errors import InputError, parse_yaml, read_user_text

DEFAULT_NETWORK_LATENCY_S: float = ClusterSpec("", ()).network_latency_s
MAX_PRESET_SERVERS = 1 << 20
"""Most servers of one cluster, preset or file (a file's counts are summed before any is
built, so a huge ``count`` fails at once instead of filling memory)."""
HETERO_TYPES = ("h100-80g-x4", "a100-80g-x4", "l4-24g-x4", "cpu-64c")
"""hetero-N: server p is of type HETERO_TYPES[p % 4], so hetero-k is a prefix of hetero-N."""
HOMOGENEOUS_TYPE = "a100-80g-x4"
CUSTOM_DEFAULT_NIC_GBPS = {False: 25.0, True: 100.0}
"""Default NIC of a custom server without / with GPUs."""
CUSTOM_DEFAULT_LOAD_GBS = 8.0

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_PosInt = Annotated[StrictInt, Field(ge=1)]
_PosFloat = Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)]
# Documented ranges (docs/cluster-and-workload.md, "Limits"): wide enough for any real server,
# narrow enough that every derived time stays a number a run can report.
_Cores = Annotated[StrictInt, Field(ge=1, le=65536)]
_Speed = Annotated[StrictFloat, Field(ge=0.01, le=100.0, allow_inf_nan=False)]
_Nic = Annotated[StrictFloat, Field(ge=0.001, le=100_000.0, allow_inf_nan=False)]
_Load = Annotated[StrictFloat, Field(ge=0, le=10_000.0, allow_inf_nan=False)]
MIN_LOAD_GBS = 0.001


class ServerEntry(BaseModel):
    """``count`` servers, either of a catalog ``type`` or described in full (custom)."""

    model_config = ConfigDict(extra="forbid")

    type: str | None = Field(
        None, description="Catalog server type; omit to describe a custom server."
    )
    name: Annotated[str, Field(pattern=_NAME)] | None = Field(
        None,
        description="Custom server: its type name (required). Catalog server: name prefix "
        "(default: the type). Instances are named <name>-<i>.",
    )
    gpu_type: str | None = Field(
        None, description="Custom server: GPU type key, null or omitted for CPU-only."
    )
    gpus: Annotated[StrictInt, Field(ge=0, le=64)] | None = Field(
        None, description="Custom server: number of GPUs (default 0)."
    )
    cpu_cores: _Cores | None = Field(
        None, description="Required for a custom server; overrides the catalog value."
    )
    core_speed: _Speed | None = Field(
        None, description="Relative core speed, 0.01-100 (default 1.0)."
    )
    nic_gbps: _Nic | None = Field(
        None,
        description="NIC bandwidth, Gb/s, 0.001-100000 (custom default: 100 with GPUs, else 25).",
    )
    load_gbs: _Load | None = Field(
        None,
        description="Weight-loading bandwidth, GB/s, 0 or 0.001-10000 (custom default: 8 with "
        "GPUs, else 0).",
    )
    count: _PosInt = Field(1, description="How many such servers.")


class ClusterFile(BaseModel):
    """A scalesched cluster file."""

    model_config = ConfigDict(extra="forbid", title="scalesched cluster file")

    name: Annotated[str, Field(min_length=1, pattern=r"^[^\n]+$")] = Field(
        description="Cluster name."
    )
    network_latency_s: Annotated[StrictFloat, Field(ge=0, le=10.0, allow_inf_nan=False)] = Field(
        DEFAULT_NETWORK_LATENCY_S, description="One-way network latency between servers, s (<= 10)."
    )
    servers: list[ServerEntry] = Field(min_length=1, description="Server groups, in order.")


def cluster_file_schema() -> dict[str, Any]:
    """JSON schema of the cluster file format (docs/cluster-schema.json)."""
    return ClusterFile.model_json_schema()


# -- loading -----------------------------------------------------------------------------


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(file)"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _known_types() -> str:
    return ", ".join(SERVER_TYPES)


def _entry_template(entry: ServerEntry, field: str, source: str) -> tuple[str, ServerType]:
    """(instance name prefix, the server description) of one validated entry."""

    def bad(name: str, message: str) -> InputError:
        return InputError(source, f"{field}.{name}", message)

    if entry.type is not None:
        base = SERVER_TYPES.get(entry.type)
        if base is None:
            raise bad("type", f"unknown server type {entry.type!r}; known: {_known_types()}")
        for fixed in ("gpu_type", "gpus"):
            if getattr(entry, fixed) is not None:
                raise bad(fixed, f"set by server type {entry.type!r}; drop it or omit `type`")
        stype = ServerType(
            name=base.name,
            gpu_type=base.gpu_type,
            gpus=base.gpus,
            cpu_cores=entry.cpu_cores if entry.cpu_cores is not None else base.cpu_cores,
            core_speed=entry.core_speed if entry.core_speed is not None else base.core_speed,
            nic_gbps=entry.nic_gbps if entry.nic_gbps is not None else base.nic_gbps,
            load_gbs=entry.load_gbs if entry.load_gbs is not None else base.load_gbs,
            description=base.description,
        )
        if stype.gpus and stype.load_gbs < MIN_LOAD_GBS:
            raise bad(
                "load_gbs",
                f"a GPU server needs load_gbs > 0 (>= {MIN_LOAD_GBS}) to load model weights",
            )
        return entry.name or base.name, stype
    if entry.name is None:
        raise bad("type", f"give a catalog `type` or a custom `name`; types: {_known_types()}")
    if entry.name in SERVER_TYPES:
        raise bad("name", f"{entry.name!r} is a catalog server type: write `type: {entry.name}`")
    gpus = entry.gpus or 0
    if gpus > 0 and entry.gpu_type is None:
        raise bad("gpu_type", f"gpus={gpus} needs a gpu_type; known: {', '.join(GPU_TYPES)}")
    if entry.gpu_type is not None:
        if entry.gpu_type not in GPU_TYPES:
            raise bad(
                "gpu_type",
                f"unknown GPU type {entry.gpu_type!r}; known: {', '.join(GPU_TYPES)}",
            )
        if gpus == 0:
            raise bad("gpus", f"gpu_type {entry.gpu_type!r} needs gpus >= 1")
    if entry.cpu_cores is None:
        raise bad("cpu_cores", "required for a custom server")
    load = entry.load_gbs
    if load is None:
        load = CUSTOM_DEFAULT_LOAD_GBS if gpus else 0.0
    if gpus and load < MIN_LOAD_GBS:
        raise bad(
            "load_gbs", f"a GPU server needs load_gbs > 0 (>= {MIN_LOAD_GBS}) to load model weights"
        )
    stype = ServerType(
        name=entry.name,
        gpu_type=entry.gpu_type,
        gpus=gpus,
        cpu_cores=entry.cpu_cores,
        core_speed=entry.core_speed if entry.core_speed is not None else 1.0,
        nic_gbps=(
            entry.nic_gbps if entry.nic_gbps is not None else CUSTOM_DEFAULT_NIC_GBPS[gpus > 0]
        ),
        load_gbs=load,
        description="custom",
    )
    return entry.name, stype


def cluster_from_dict(data: Any, source: str) -> ClusterSpec:
    """Validate the parsed content of a cluster file; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise InputError(source, "(file)", "expected a mapping with name and servers")
    try:
        parsed = ClusterFile.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        first = errs[0]
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise InputError(source, _loc(first["loc"]), _one_line(first["msg"]) + more) from None
    total = 0
    for i, entry in enumerate(parsed.servers):
        total += entry.count
        if total > MAX_PRESET_SERVERS:
            raise InputError(
                source,
                f"servers[{i}].count",
                f"the cluster would have {total} or more servers; at most {MAX_PRESET_SERVERS}",
            )
    servers: list[ServerSpec] = []
    counters: dict[str, int] = {}
    for i, entry in enumerate(parsed.servers):
        prefix, stype = _entry_template(entry, f"servers[{i}]", source)
        for _ in range(entry.count):
            k = counters.get(prefix, 0)
            counters[prefix] = k + 1
            spec = stype.instance(k)
            if prefix != stype.name:
                spec = ServerSpec(
                    name=f"{prefix}-{k}",
                    type=spec.type,
                    gpu_type=spec.gpu_type,
                    gpus=spec.gpus,
                    cpu_cores=spec.cpu_cores,
                    core_speed=spec.core_speed,
                    nic_gbps=spec.nic_gbps,
                    load_gbs=spec.load_gbs,
                )
            servers.append(spec)
    return ClusterSpec(
        name=parsed.name, servers=tuple(servers), network_latency_s=parsed.network_latency_s
    )


def load_cluster_file(path: str | os.PathLike[str]) -> ClusterSpec:
    """Read and validate a YAML cluster file."""
    source = str(path)
    text = read_user_text(path, field="(file)", what="cluster file")
    return cluster_from_dict(parse_yaml(text, source), source)


# -- writing -----------------------------------------------------------------------------


def cluster_to_dict(cluster: ClusterSpec) -> dict[str, Any]:
    """A cluster-file mapping that loads back to an equal ``ClusterSpec`` (for servers named
    ``<prefix>-<i>`` in order, as files and presets name them)."""
    entries: list[dict[str, Any]] = []
    prev_key: tuple[Any, ...] | None = None
    for s in cluster.servers:
        prefix = s.name.rsplit("-", 1)[0]
        key = (
            prefix,
            s.type,
            s.gpu_type,
            s.gpus,
            s.cpu_cores,
            s.core_speed,
            s.nic_gbps,
            s.load_gbs,
        )
        if key == prev_key:
            entries[-1]["count"] += 1
            continue
        prev_key = key
        base = SERVER_TYPES.get(s.type)
        entry: dict[str, Any] = {}
        if base is not None and (base.gpu_type, base.gpus) == (s.gpu_type, s.gpus):
            entry["type"] = s.type
            if prefix != s.type:
                entry["name"] = prefix
            for f in ("cpu_cores", "core_speed", "nic_gbps", "load_gbs"):
                if getattr(s, f) != getattr(base, f):
                    entry[f] = getattr(s, f)
        else:
            entry = {
                "name": s.type,
                "gpu_type": s.gpu_type,
                "gpus": s.gpus,
                "cpu_cores": s.cpu_cores,
                "core_speed": s.core_speed,
                "nic_gbps": s.nic_gbps,
                "load_gbs": s.load_gbs,
            }
        entry["count"] = 1
        entries.append(entry)
    return {
        "name": cluster.name,
        "network_latency_s": cluster.network_latency_s,
        "servers": entries,
    }


def cluster_to_yaml(cluster: ClusterSpec) -> str:
    return yaml.safe_dump(cluster_to_dict(cluster), sort_keys=False)


# -- presets -----------------------------------------------------------------------------

_PRESETS: list[tuple[str, str]] = [
    (
        "hetero-N",
        "N servers, a quarter each of h100-80g-x4, a100-80g-x4, l4-24g-x4, cpu-64c, "
        "interleaved in that order (type i gets N//4 + (i < N%4))",
    ),
    ("homogeneous-N", f"N x {HOMOGENEOUS_TYPE}"),
    ("homogeneous-N:TYPE", "N servers of catalog type TYPE, e.g. homogeneous-8:h100-80g-x8"),
]
_PRESET_RE = re.compile(r"^(hetero|homogeneous)-([^:]*)(?::(.*))?$")


def list_cluster_presets() -> list[tuple[str, str]]:
    """(name pattern, description) of every preset form."""
    return list(_PRESETS)


def _preset_help() -> str:
    return ", ".join(p for p, _ in _PRESETS) + " (N >= 1)"


@lru_cache(maxsize=64)
def _preset(spec: str) -> ClusterSpec:
    m = _PRESET_RE.match(spec)
    if m is None:
        raise InputError(
            spec,
            "cluster",
            f"not a cluster preset or a .yaml/.yml file; presets: {_preset_help()}",
        )
    kind, n_text, type_key = m.group(1), m.group(2), m.group(3)
    if not n_text.isdigit() or int(n_text) < 1:
        raise InputError(spec, "N", f"server count must be an integer >= 1, got {n_text!r}")
    n = int(n_text)
    if n > MAX_PRESET_SERVERS:
        raise InputError(spec, "N", f"at most {MAX_PRESET_SERVERS} servers, got {n}")
    if kind == "hetero":
        if type_key is not None:
            raise InputError(spec, "TYPE", "hetero-N takes no :TYPE; use homogeneous-N:TYPE")
        types = [SERVER_TYPES[t] for t in HETERO_TYPES]
        servers = tuple(types[p % 4].instance(p // 4) for p in range(n))
    else:
        key = HOMOGENEOUS_TYPE if type_key is None else type_key
        stype = SERVER_TYPES.get(key)
        if stype is None:
            raise InputError(spec, "TYPE", f"unknown server type {key!r}; known: {_known_types()}")
        servers = tuple(stype.instance(i) for i in range(n))
    return ClusterSpec(name=spec, servers=servers)


def _looks_like_path(spec: str) -> bool:
    return (
        spec.endswith((".yaml", ".yml"))
        or os.sep in spec
        or "/" in spec
        or (os.path.exists(spec) and not _PRESET_RE.match(spec))
    )


def get_cluster(spec: str | os.PathLike[str]) -> ClusterSpec:
    """A preset (``hetero-N``, ``homogeneous-N``, ``homogeneous-N:TYPE``) or a YAML file."""
    if not isinstance(spec, str):
        return load_cluster_file(spec)
    if _looks_like_path(spec):
        return load_cluster_file(spec)
    return _preset(spec.strip())


def cluster_schema_json() -> str:
    """The committed text of docs/cluster-schema.json."""
    return json.dumps(cluster_file_schema(), indent=2) + "\n"
