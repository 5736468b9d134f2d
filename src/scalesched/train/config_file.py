"""Training config files: one YAML reader and one validator for every algorithm.

A file names its algorithm with ``algorithm:`` (``ppo`` when absent, so every config
written before expert iteration existed still reads as before); the rest are fields of
that algorithm's config dataclass, validated by pydantic, unknown or ill-typed keys
refused with the file and the field named.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from scalesched.errors import InputError, parse_yaml

ALGORITHMS = ("ppo", "dagger")
"""What ``algorithm:`` may name: PPO (``train.ppo``) or expert iteration (``train.dagger``)."""

Config = TypeVar("Config")


def world_line(residency: str) -> str:
    """How a training run's output names its world (docs/worlds.md)."""
    if residency == "planned":
        return "planned (each episode on the deployment planned for its rate)"
    return "dynamic (models loaded on demand)"


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The YAML mapping in ``path``; InputError on a missing, unreadable or non-mapping file."""
    source, p = str(path), Path(path)
    if not p.is_file():
        raise InputError(source, "file", "config file not found")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, "file", f"cannot read: {exc}") from None
    loaded = parse_yaml(text, source) or {}
    if not isinstance(loaded, dict):
        raise InputError(source, "file", "expected a mapping of config fields")
    return loaded


SETTING_LISTS = ("settings", "more_settings", "selection_settings")
"""The config fields that list settings, each naming its own cluster."""


def clusters_beside(folder: Path, data: dict[str, Any]) -> None:
    """Cluster files a config names by a relative path that exists beside it are taken
    from there (a preset ships its cluster files in its folder, so it runs from any working
    directory); any other name is left as written (a preset, or a path from the CWD)."""
    listed = [x for key in SETTING_LISTS for x in data.get(key) or []]
    entries = [data, *(x for x in listed if isinstance(x, dict))]
    for entry in entries:
        name = entry.get("cluster")
        if isinstance(name, str) and not Path(name).is_absolute() and (folder / name).is_file():
            entry["cluster"] = str(folder / name)


def algorithm_of(path: str | Path | None) -> str:
    """The algorithm a config file names (``ppo`` when it names none, or with no file)."""
    if path is None:
        return "ppo"
    name = read_mapping(path).get("algorithm", "ppo")
    if name not in ALGORITHMS:
        raise InputError(str(path), "algorithm", f"must be one of {', '.join(ALGORITHMS)}")
    return str(name)


def validated(cls: type[Config], data: dict[str, Any], source: str) -> Config:
    """``data`` as a ``cls`` config; the first validation error as an InputError."""
    try:
        return TypeAdapter(cls).validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(file)"
        raise InputError(source, loc, err["msg"]) from None


def parse_overrides(items: list[str], known: Iterable[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` strings (the CLI's ``--set``) as config fields, each value read as
    YAML; a malformed item or a field not in ``known`` is an InputError naming it."""
    names = set(known)
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError("--set", item, "expected FIELD=VALUE")
        if key not in names:
            raise InputError("--set", key, "not a training config field")
        overrides[key] = parse_yaml(value, f"--set {key}")
    return overrides
