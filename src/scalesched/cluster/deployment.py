"""Deployment files: model replicas pinned to GPU groups of a cluster (YAML, validated).

A deployment replaces dynamic model residency: every listed replica is resident from the
start and never unloads, and a task of model M may run only on a server that holds a
replica of M.  One replica is ``model`` on the GPUs ``gpus`` (their count is the
tensor-parallel degree) of one ``server``, holding ``share`` (1, 1/2 or 1/4) of each:
co-located replicas split a GPU's compute and memory bandwidth MPS-style and partition its
memory, which must hold the weights plus ``MIN_KV_TOKENS`` of KV cache.

Replicas of one model on one server must agree on tp and share: the simulator serves them
as one data-parallel group (``perf.ReplicaGroupPerf``).

Schema: ``deployment_schema()``, committed as docs/deployment-schema.json
(regenerate: ``python -m scalesched.cluster.deployment > docs/deployment-schema.json``).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import (
    GPU_SHARES,
    MIN_KV_TOKENS,
    MODELS,
    TP_DEGREES,
    ReplicaGroupPerf,
    replica_fits,
    replica_group_perf,
)
from scalesched.cluster.spec import _loc, _one_line
from scalesched.errors import InputError, parse_yaml

_SHARE_TEXT = {"1": 1.0, "1/1": 1.0, "1/2": 0.5, "1/4": 0.25}


class ReplicaEntry(BaseModel):
    """One replica of one model on GPUs of one server."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Model name from the LLM catalog (see cost model).")
    server: str = Field(description="Server instance name in the cluster, e.g. h100-80g-x4-0.")
    gpus: list[Annotated[StrictInt, Field(ge=0)]] = Field(
        min_length=1,
        max_length=8,
        description="GPU indices on the server; their count is the tensor-parallel degree "
        "(1, 2, 4 or 8).",
    )
    share: float | str = Field(
        1.0,
        description="Fraction of each of those GPUs the replica holds: 1, 0.5 or 0.25 "
        "(also '1/2', '1/4').",
    )


class DeploymentFile(BaseModel):
    """A scalesched deployment file."""

    model_config = ConfigDict(extra="forbid", title="scalesched deployment file")

    name: Annotated[str, Field(min_length=1, pattern=r"^[^\n]+$")] = Field(
        description="Deployment name."
    )
    cluster: str | None = Field(
        None,
        description="Name of the cluster it was made for; if given, it must match the "
        "cluster it is used with.",
    )
    replicas: list[ReplicaEntry] = Field(min_length=1, description="Pinned model replicas.")


def deployment_schema() -> dict[str, Any]:
    """JSON schema of the deployment file format (docs/deployment-schema.json)."""
    return DeploymentFile.model_json_schema()


def deployment_schema_json() -> str:
    return json.dumps(deployment_schema(), indent=2) + "\n"


@dataclass(frozen=True, slots=True)
class Replica:
    model: str
    server: str
    gpus: tuple[int, ...]
    share: float

    @property
    def tp(self) -> int:
        return len(self.gpus)


@dataclass(frozen=True, slots=True)
class Deployment:
    """A validated deployment on one cluster, with the engines the simulator runs."""

    name: str
    cluster: str
    replicas: tuple[Replica, ...]
    groups: dict[tuple[int, str], ReplicaGroupPerf]
    """(server index, model) -> the replica group served there."""

    def engine_at(self, server: int, model: str) -> ReplicaGroupPerf | None:
        """The replica group of ``model`` on server index ``server``; None if there is none."""
        return self.groups.get((server, model))

    @property
    def gpus_used(self) -> float:
        return sum(r.tp * r.share for r in self.replicas)

    def models(self) -> set[str]:
        return {r.model for r in self.replicas}


def _share(value: float | str, source: str, field: str) -> float:
    if isinstance(value, str):
        got = _SHARE_TEXT.get(value.strip())
        if got is None:
            raise InputError(source, field, f"share {value!r}: use 1, 0.5, 0.25, '1/2' or '1/4'")
        return got
    if float(value) not in GPU_SHARES:
        raise InputError(source, field, f"share {value!r}: use one of {GPU_SHARES}")
    return float(value)


def deployment_from_dict(data: Any, cluster: ClusterSpec, source: str) -> Deployment:
    """Validate the parsed content of a deployment file against ``cluster``."""
    if not isinstance(data, dict):
        raise InputError(source, "(file)", "expected a mapping with name and replicas")
    try:
        parsed = DeploymentFile.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise InputError(source, _loc(errs[0]["loc"]), _one_line(errs[0]["msg"]) + more) from None
    if parsed.cluster is not None and parsed.cluster != cluster.name:
        raise InputError(
            source, "cluster", f"made for cluster {parsed.cluster!r}, used with {cluster.name!r}"
        )
    index = {s.name: i for i, s in enumerate(cluster.servers)}
    used: dict[tuple[int, int], Fraction] = defaultdict(Fraction)
    first: dict[tuple[int, str], tuple[int, int, float]] = {}
    counts: dict[tuple[int, str], int] = defaultdict(int)
    replicas: list[Replica] = []
    for i, e in enumerate(parsed.replicas):
        f = f"replicas[{i}]"
        if e.model not in MODELS:
            raise InputError(
                source, f"{f}.model", f"unknown model {e.model!r}; known: {', '.join(MODELS)}"
            )
        si = index.get(e.server)
        if si is None:
            raise InputError(source, f"{f}.server", f"no server {e.server!r} in {cluster.name}")
        server = cluster.servers[si]
        if server.gpu_type is None or server.gpus == 0:
            raise InputError(source, f"{f}.server", f"{e.server} has no GPUs")
        share = _share(e.share, source, f"{f}.share")
        tp = len(e.gpus)
        if tp not in TP_DEGREES:
            raise InputError(source, f"{f}.gpus", f"{tp} GPUs: tp must be one of {TP_DEGREES}")
        if len(set(e.gpus)) != tp:
            raise InputError(source, f"{f}.gpus", f"repeated GPU index in {e.gpus}")
        bad = [g for g in e.gpus if g >= server.gpus]
        if bad:
            raise InputError(
                source, f"{f}.gpus", f"GPU {bad[0]} out of range: {e.server} has {server.gpus}"
            )
        if not replica_fits(e.model, server.gpu_type, tp, share):
            raise InputError(
                source,
                f"{f}.gpus",
                f"{e.model} does not fit on {share:g} of {tp} x {server.gpu_type} "
                f"(weights + {MIN_KV_TOKENS} KV tokens in 90% of the memory, or no tp profile)",
            )
        for g in e.gpus:
            used[si, g] += Fraction(share)
            if used[si, g] > 1:
                raise InputError(
                    source, f"{f}.gpus", f"GPU {g} of {e.server} oversubscribed (shares sum > 1)"
                )
        key = (si, e.model)
        if key in first and first[key][1:] != (tp, share):
            j = first[key][0]
            raise InputError(
                source,
                f"{f}.gpus",
                f"replicas of {e.model} on {e.server} must share tp and share "
                f"(replicas[{j}] has tp {first[key][1]}, share {first[key][2]:g})",
            )
        first.setdefault(key, (i, tp, share))
        counts[key] += 1
        replicas.append(Replica(e.model, e.server, tuple(e.gpus), share))
    groups = {}
    for (si, model), n in counts.items():
        _, tp, share = first[si, model]
        gpu_type = cluster.servers[si].gpu_type
        assert gpu_type is not None
        groups[si, model] = replica_group_perf(model, gpu_type, tp, share, n)
    return Deployment(parsed.name, cluster.name, tuple(replicas), groups)


def load_deployment_file(path: str | os.PathLike[str], cluster: ClusterSpec) -> Deployment:
    """Read a YAML deployment file and validate it against ``cluster``."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(source, "(file)", "no such deployment file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, "(file)", f"cannot read: {_one_line(str(exc))}") from None
    data = parse_yaml(text, source)  # strict: duplicate keys, nesting depth
    return deployment_from_dict(data, cluster, source)


def deployment_to_dict(name: str, cluster: str, replicas: list[Replica]) -> dict[str, Any]:
    """A deployment-file mapping (what ``plan --out`` writes)."""
    return {
        "name": name,
        "cluster": cluster,
        "replicas": [
            {"model": r.model, "server": r.server, "gpus": list(r.gpus), "share": r.share}
            for r in replicas
        ],
    }


if __name__ == "__main__":
    sys.stdout.write(deployment_schema_json())
