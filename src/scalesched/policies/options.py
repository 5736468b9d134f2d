"""Policy options where a policy is named: ``NAME:KEY=VALUE,KEY=VALUE``.

Why: some choices belong to a run, not to the code. A lookahead's budget
(``rollout:candidates=4,horizon_s=10``), the quantile ``tail`` plans for
(``tail:level=0.5``) or the heuristic an oracle rolls out over
(``rollout_oracle:base=least_loaded``) are set wherever ``--policy`` (or a policies list)
takes a name, so a study varies them without writing Python.

The options of a policy are its constructor's keyword parameters whose type is a plain
value: an int, a float, a flag, a string, a choice among literals, or one of these or
``none``. Parameters that take objects (a base scheduler, a predictor, a sampler) are not
options. Values are converted and checked by pydantic against the parameter's type; a
policy's own range checks (its constructor's ``ValueError``) are reported the same way, as
one line naming the policy and the option. A scheduler built with options is named by its
spec in results (``rollout:horizon_s=10``), so two option sets never share a row.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from scalesched.decision.scheduler import Scheduler
from scalesched.errors import InputError

_PLAIN = (int, float, bool, str)


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"rollout:horizon_s=10"`` -> ``("rollout", "horizon_s=10")``; no colon: no options."""
    name, colon, options = spec.partition(":")
    return (name, options) if colon else (spec, None)


def split_policy_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of policy specs, whose options also use commas:
    ``"rollout:candidates=4,horizon_s=10,tail"`` -> ``("rollout:candidates=4,horizon_s=10",
    "tail")``. An item with ``=`` and no ``:`` continues the previous spec's options (a
    policy name never holds ``=``)."""
    specs: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if specs and "=" in item and ":" not in item and ":" in specs[-1]:
            specs[-1] += f",{item}"
        else:
            specs.append(item)
    return tuple(specs)


def _is_plain(hint: Any) -> bool:
    """Whether a parameter of this type can be written on a command line."""
    if hint in _PLAIN:
        return True
    origin = typing.get_origin(hint)
    if origin is Literal:
        return all(isinstance(v, _PLAIN) for v in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(args) == 1 and _is_plain(args[0])
    return False


def _hints(factory: Callable[..., Any]) -> dict[str, Any]:
    target = factory if dataclasses.is_dataclass(factory) else factory.__init__  # type: ignore[misc]
    return typing.get_type_hints(target)


def policy_options(factory: Callable[..., Any]) -> dict[str, tuple[Any, Any]]:
    """The options a policy class takes: name -> (type, default), in signature order."""
    hints = _hints(factory)
    options: dict[str, tuple[Any, Any]] = {}
    for name, param in inspect.signature(factory).parameters.items():
        hint = hints.get(name)
        if param.default is inspect.Parameter.empty or name.startswith("_"):
            continue
        if hint is not None and _is_plain(hint):
            options[name] = (hint, param.default)
    return options


def describe_options(factory: Callable[..., Any]) -> str:
    """``"candidates=3, horizon_s=20.0, ..."``: the options and their defaults, for listings."""
    return ", ".join(f"{k}={d}" for k, (_, d) in policy_options(factory).items())


def _value(policy: str, key: str, hint: Any, raw: str) -> Any:
    if raw.lower() == "none" and type(None) in typing.get_args(hint):
        return None
    try:
        return TypeAdapter(hint).validate_python(raw)
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise InputError("--policy", f"{policy}:{key}", f"{raw!r}: {why}") from None


def parse_options(policy: str, factory: Callable[..., Any], text: str) -> dict[str, Any]:
    """``"candidates=4,horizon_s=10"`` -> keyword arguments of ``factory``, converted and
    checked; an unknown key, a missing ``=`` or a bad value is an ``InputError``."""
    known = policy_options(factory)
    kwargs: dict[str, Any] = {}
    for item in text.split(","):
        key, eq, raw = (part.strip() for part in item.partition("="))
        if not eq or not key:
            raise InputError("--policy", policy, f"option {item!r} is not KEY=VALUE")
        if key not in known:
            listed = ", ".join(known) or "none"
            raise InputError("--policy", f"{policy}:{key}", f"unknown option; options: {listed}")
        if key in kwargs:
            raise InputError("--policy", f"{policy}:{key}", "given twice")
        kwargs[key] = _value(policy, key, known[key][0], raw)
    return kwargs


def build_with_options(policy: str, factory: Callable[..., Scheduler], text: str) -> Scheduler:
    """A scheduler of ``factory`` with the options ``text``, named by its full spec."""
    kwargs = parse_options(policy, factory, text)
    try:
        scheduler = factory(**kwargs)
    except ValueError as exc:
        raise InputError("--policy", policy, str(exc)) from None
    spec = ",".join(f"{k}={v}" for k, v in kwargs.items())
    scheduler.name = f"{policy}:{spec}"  # type: ignore[misc]
    return scheduler
