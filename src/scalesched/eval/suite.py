"""A committed suite of named settings (cluster, workload, arrivals, load, world), read and
checked in one place.

Why a file in the package: a robustness claim is only as good as the settings it was
measured on, and settings chosen after seeing results flatter the policy. The shipped
suite (``eval/data/robustness.yaml``) was fixed before any policy was trained against it
and names three disjoint sets: ``evaluation`` (what a policy is judged on), ``training`` and
``selection`` (what a policy may be fitted and chosen on). No cluster mix of the evaluation
set appears in the other two (:func:`mix_of`: the share of each server kind, so hetero-32
is hetero-16's mix), and no evaluation seed is a training or selection seed. A bad file
gets one line naming the file and the field (``InputError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scalesched.cluster.model import ClusterSpec
from scalesched.errors import InputError, parse_yaml, read_user_text
from scalesched.runs.length import STEADY_ARRIVALS

SHIPPED_SUITES = ("robustness",)
"""Suites shipped in ``scalesched/eval/data`` (``--suite NAME``); any other value is a path."""
SET_NAMES = ("evaluation", "training", "selection")
MAX_SETTINGS = 1000

_Name = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")


class _SettingModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = _Name
    cluster: str
    workload: str = Field(min_length=1, max_length=200)
    arrivals: Literal["poisson", "bursty", "azure-conv", "azure-code"]
    load: float = Field(ge=0.05, le=1.0, allow_inf_nan=False)
    world: Literal["planned", "dynamic"]
    workflows: int | None = Field(default=None, ge=10, le=100_000)


class _SeedsModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    evaluation: list[int] = Field(min_length=1, max_length=100)
    selection: list[int] = Field(min_length=1, max_length=100)
    training_from: int = Field(ge=0)


class _SuiteModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = _Name
    version: int = Field(ge=1)
    policies: list[str] = Field(min_length=1, max_length=50)
    seeds: _SeedsModel
    clusters: dict[str, dict[str, Any]] = Field(min_length=1, max_length=200)
    evaluation: list[_SettingModel] = Field(min_length=1, max_length=MAX_SETTINGS)
    training: list[_SettingModel] = Field(min_length=1, max_length=MAX_SETTINGS)
    selection: list[_SettingModel] = Field(min_length=1, max_length=MAX_SETTINGS)


@dataclass(frozen=True)
class SuiteSetting:
    """One setting: its runs compare every policy with the best heuristic there."""

    name: str
    cluster: str
    """The suite's name of the cluster (``Suite.clusters``)."""
    workload: str
    arrivals: str
    load: float
    """A fraction of this world's capacity on this cluster and workload."""
    world: str
    """``planned`` or ``dynamic`` residency (``scalesched.runs.world``)."""
    workflows: int | None = None
    """A fixed run length (arrivals without a steady state); None: grown to the precision."""

    @property
    def steady_arrivals(self) -> bool:
        return self.arrivals in STEADY_ARRIVALS


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    source: str
    policies: tuple[str, ...]
    """The learned policies the suite is run with by default."""
    evaluation_seeds: tuple[int, ...]
    selection_seeds: tuple[int, ...]
    training_seeds_from: int
    clusters: Mapping[str, ClusterSpec]
    cluster_entries: Mapping[str, dict[str, Any]]
    """Each cluster as the file gives it: ``{"preset": NAME}`` or a cluster file's fields."""
    evaluation: tuple[SuiteSetting, ...]
    training: tuple[SuiteSetting, ...]
    selection: tuple[SuiteSetting, ...]

    def settings(self, which: str = "evaluation") -> tuple[SuiteSetting, ...]:
        """The settings of one set: ``evaluation``, ``training`` or ``selection``."""
        sets = {"evaluation": self.evaluation, "training": self.training}
        return sets[which] if which in sets else {"selection": self.selection}[which]

    def pick(self, names: str | None, which: str = "evaluation") -> tuple[SuiteSetting, ...]:
        """The settings of set ``which`` named in ``names`` (comma-separated; None: all),
        in the suite's order; an unknown name is an ``InputError`` on ``--settings``."""
        pool = self.settings(which)
        if names is None:
            return pool
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        known = {s.name: s for s in pool}
        for n in wanted:
            if n not in known:
                other = next((w for w in SET_NAMES if w != which and n in _names(self, w)), None)
                article = "an" if other and other[0] in "aeiou" else "a"
                why = f"{article} {other} setting, not in this set" if other else "unknown setting"
                raise InputError(
                    "--settings",
                    "settings",
                    f"{n!r}: {why}; {which} settings: " + ", ".join(known),
                )
        if not wanted:
            raise InputError("--settings", "settings", "name at least one setting")
        return tuple(s for s in pool if s.name in wanted)


def _names(suite: Suite, which: str) -> set[str]:
    return {s.name for s in suite.settings(which)}


def suite_path(name_or_path: str) -> Path:
    """A shipped suite's file by name, else the value as a path."""
    if name_or_path in SHIPPED_SUITES:
        data = resources.files("scalesched.eval").joinpath("data", f"{name_or_path}.yaml")
        return Path(str(data))
    return Path(name_or_path)


def load_suite(name_or_path: str = "robustness") -> Suite:
    """The suite, read and checked (:func:`check_suite`); ``InputError`` naming the file and
    field on anything wrong."""
    path = suite_path(name_or_path)
    source = str(path) if name_or_path not in SHIPPED_SUITES else f"suite {name_or_path}"
    if name_or_path not in SHIPPED_SUITES and not path.is_file():
        known = ", ".join(SHIPPED_SUITES)
        raise InputError("--suite", "suite", f"{name_or_path!r}: no such suite ({known}) or file")
    data = parse_yaml(read_user_text(path, field="suite", what="suite file"), source)
    if not isinstance(data, dict):
        raise InputError(source, "(file)", "expected a mapping (name, seeds, clusters, ...)")
    try:
        model = _SuiteModel.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(source, _loc(first["loc"]), " ".join(str(first["msg"]).split())) from None
    suite = Suite(
        name=model.name,
        version=model.version,
        source=source,
        policies=tuple(model.policies),
        evaluation_seeds=tuple(model.seeds.evaluation),
        selection_seeds=tuple(model.seeds.selection),
        training_seeds_from=model.seeds.training_from,
        clusters={k: _cluster(k, v, source) for k, v in model.clusters.items()},
        cluster_entries=dict(model.clusters),
        **{w: tuple(SuiteSetting(**s.model_dump()) for s in getattr(model, w)) for w in SET_NAMES},
    )
    check_suite(suite)
    return suite


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def _cluster(name: str, entry: dict[str, Any], source: str) -> ClusterSpec:
    """A cluster of the file: ``{preset: NAME}`` or a cluster file's fields (less ``name``)."""
    from scalesched.cluster.spec import cluster_from_dict, get_cluster

    field = f"clusters.{name}"
    try:
        if "preset" in entry:
            if set(entry) != {"preset"} or not isinstance(entry["preset"], str):
                raise InputError(source, field, "a preset entry has one key, preset: NAME")
            if "/" in entry["preset"] or entry["preset"].endswith((".yaml", ".yml")):
                raise InputError(source, f"{field}.preset", "a preset name, not a file path")
            return get_cluster(entry["preset"])
        return cluster_from_dict({"name": name, **entry}, source)
    except InputError as exc:
        inner = exc.field if exc.source == source else f"{exc.field}"
        where = inner if inner.startswith(field) else f"{field}.{inner}".rstrip(".")
        raise InputError(source, where, exc.message) from None


def mix_of(spec: ClusterSpec) -> frozenset[tuple[str, float]]:
    """The share of each server kind (GPU type and count, cores) in ``spec``, rounded: the
    composition a policy could learn, whatever the cluster's size."""
    kinds: dict[str, int] = {}
    for s in spec.servers:
        key = f"{s.gpu_type or 'cpu'}x{s.gpus}/{s.cpu_cores}c"
        kinds[key] = kinds.get(key, 0) + 1
    n = len(spec.servers)
    return frozenset((k, round(c / n, 6)) for k, c in kinds.items())


def check_suite(suite: Suite) -> None:
    """The rules a suite file must keep, beyond each field's own type and range."""
    src = suite.source
    seen: set[str] = set()
    for which in SET_NAMES:
        for i, s in enumerate(suite.settings(which)):
            field = f"{which}[{i}]"
            if s.name in seen:
                raise InputError(src, f"{field}.name", f"{s.name!r} is named twice")
            seen.add(s.name)
            if s.cluster not in suite.clusters:
                known = ", ".join(suite.clusters)
                raise InputError(src, f"{field}.cluster", f"unknown {s.cluster!r}; known: {known}")
            _check_workload(s.workload, src, f"{field}.workload")
            if not s.steady_arrivals and s.workflows is None:
                raise InputError(
                    src, f"{field}.workflows", f"arrivals {s.arrivals} have no steady state, "
                    "so no length reaches a precision: give workflows"
                )  # fmt: skip
    _check_disjoint_mixes(suite)
    _check_seeds(suite)


def _check_workload(spec: str, source: str, field: str) -> None:
    from scalesched.workload.source import get_workload

    if spec.startswith("wfcommons:"):
        return  # generated on first use (the optional extra); its spec is checked there
    try:
        get_workload(spec)
    except InputError as exc:
        raise InputError(source, field, exc.message) from None


def _check_disjoint_mixes(suite: Suite) -> None:
    fitted = {
        mix_of(suite.clusters[s.cluster]): s.name for w in ("training", "selection")
        for s in suite.settings(w)
    }  # fmt: skip
    for i, s in enumerate(suite.evaluation):
        other = fitted.get(mix_of(suite.clusters[s.cluster]))
        if other is not None:
            raise InputError(
                suite.source, f"evaluation[{i}].cluster", f"{s.cluster}'s mix is also the mix "
                f"of {other}: no evaluation mix may be used in training or selection"
            )  # fmt: skip


def _check_seeds(suite: Suite) -> None:
    src = suite.source
    shared = sorted(set(suite.evaluation_seeds) & set(suite.selection_seeds))
    if shared:
        raise InputError(src, "seeds.evaluation", f"{shared} are also selection seeds")
    if max(suite.evaluation_seeds) >= suite.training_seeds_from:
        raise InputError(
            src, "seeds.evaluation", f"must all be below training_from "
            f"({suite.training_seeds_from}): training draws its seeds from there up"
        )  # fmt: skip
    if len(set(suite.evaluation_seeds)) != len(suite.evaluation_seeds):
        raise InputError(src, "seeds.evaluation", "a seed is listed twice")
    if any(not 0 <= s < 2**63 for s in (*suite.evaluation_seeds, *suite.selection_seeds)):
        raise InputError(src, "seeds", "seeds must be integers in [0, 2**63 - 1]")
