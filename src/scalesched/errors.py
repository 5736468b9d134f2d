"""One error type for bad user input, so the CLI can print one line and exit 2.

Every message names where the bad value came from (a file, a preset, an option) and the
field, because a user fixing a config needs both.

The parsers here (:func:`parse_yaml`, :func:`parse_json`) are the one way user files are
read, so every file gets the same guards: duplicate mapping keys are an error (YAML would
silently keep the last), and nesting too deep for the parser is a clean error, not a
``RecursionError``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from functools import wraps
from pathlib import Path
from typing import Any, SupportsFloat, TypeVar, cast

_F = TypeVar("_F", bound=Callable[..., Any])


class InputError(ValueError):
    """Bad user input: a file, preset name, option or field that cannot be used as given."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = source if source.lstrip("-") == field else f"{source}: {field}"
        super().__init__(one_line(f"{where}: {message}"))

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str]]:
        """Rebuilt from its three parts: an error raised in a worker process (``eval
        --jobs``) reaches the parent as itself, not as a broken process pool."""
        return type(self), (self.source, self.field, self.message)


def one_line(text: str) -> str:
    """``text`` with every line break and control character escaped (``\\n``, ``\\x1e``):
    a message that echoes a user's value stays one line however the value was typed."""
    return "".join(
        c if c.isprintable() or c == " " else repr(c)[1:-1] if c.isascii() else f"\\u{ord(c):04x}"
        for c in text
    )


MAX_FILE_BYTES = 256 << 20
"""Largest user file read (256 MiB); a bigger one is almost surely the wrong file."""


def read_user_text(path: str | os.PathLike[str], *, field: str = "file", what: str = "file") -> str:
    """The text of a file the user named, or one line naming it: missing (``no such
    {what}``), not a regular file, larger than ``MAX_FILE_BYTES``, or unreadable (not
    UTF-8, no permission). The one way every user file is opened."""
    src, p = str(path), Path(path)
    if not p.is_file():
        raise InputError(src, field, f"no such {what}" if not p.exists() else "not a regular file")
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise InputError(src, field, f"larger than {MAX_FILE_BYTES >> 20} MiB")
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(src, field, f"cannot read: {_one_line(exc)}") from None


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML like ``yaml.safe_load``, but a repeated key in one mapping is an error."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: let the default constructor report it
                continue
            if dup:
                line = key_node.start_mark.line + 1
                raise InputError(source, str(key), f"duplicate key at line {line}")
        return loader.construct_mapping(node, deep=deep)

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    if _flow_depth(text) > MAX_NESTING:
        raise InputError(source, "(file)", f"nested more than {MAX_NESTING} levels deep")
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise InputError(source, "(file)", "nested too deeply to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(source, "(file)", f"malformed YAML: {where}{_one_line(problem)}") from None


MAX_NESTING = 200
"""Deepest ``[``/``{`` nesting read from YAML: PyYAML scans a deep file for minutes (about
1 ms per level) before its composer runs out of recursion."""


def _flow_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` outside quoted strings (cheap when there are few)."""
    import re

    if text.count("[") + text.count("{") <= MAX_NESTING:
        return 0
    unquoted = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', "", text)
    depth = deepest = 0
    for match in re.finditer(r"[\[\]{}]", unquoted):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_json(text: str, source: str, field: str = "json") -> Any:
    """Parse JSON; a repeated key in one object, NaN/Infinity literals and nesting too deep
    to read are errors naming ``source``."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise InputError(source, key, "duplicate key in one JSON object")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise InputError(source, field, f"{name} is not a JSON number; write a finite number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except RecursionError:
        raise InputError(source, field, "nested too deeply to read") from None
    except json.JSONDecodeError as e:
        raise InputError(
            source, field, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except ValueError as e:  # e.g. an integer literal of more than 4300 digits
        raise InputError(source, field, f"invalid JSON: {_one_line(e)[:160]}") from None


def short_repr(value: object, limit: int = 40) -> str:
    """``repr`` cut to ``limit`` characters, so a hostile value keeps a message one line."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = len(str(abs(value))) if abs(value) < 10**4000 else "over 4000"
        return f"an integer of {digits} digits"
    text = _one_line(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def require_finite(values: Mapping[str, Any], source: str) -> None:
    """Fail, naming the first key, when a numeric value is NaN or infinite: a run that
    cannot produce a number must say so rather than print ``NaN`` or ``Infinity``."""
    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(
                source,
                key,
                f"came out {value}: the inputs' sizes or times are beyond what the run can "
                "measure; check the workload's work, tokens and arrival times",
            )


def clean_errors(fn: _F) -> _F:
    """For CLI commands: bad input becomes one line on stderr and exit code 2 (typer is
    imported only when that happens, so this module stays free of CLI dependencies)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            import typer

            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


NULL_REASON_SUFFIX = "_null_reason"
"""A key ``k`` printed as ``null`` is followed by ``k + NULL_REASON_SUFFIX`` saying why."""


def json_safe(value: Any, reasons: Mapping[str, str] | None = None) -> Any:
    """``value`` (dicts, lists, tuples, scalars) with every NaN or infinite float replaced
    by ``None``, so strict JSON readers never meet ``NaN``/``Infinity``; each dict key whose
    value was (or held) such a float gains a sibling ``<key>_null_reason``, from
    ``reasons[key]`` when given, else a generic one naming what the number was."""
    reasons = reasons or {}

    def why(key: str, bad: float) -> str:
        if key in reasons:
            return reasons[key]
        kind = "NaN" if math.isnan(bad) else "infinite"
        return f"not a finite number ({kind}): nothing was measured that defines it"

    def walk(node: Any) -> tuple[Any, float | None]:
        if isinstance(node, float | _np_floating()):
            x = float(cast(SupportsFloat, node))
            return (x, None) if math.isfinite(x) else (None, x)
        if isinstance(node, Mapping):
            out: dict[Any, Any] = {}
            for key, item in node.items():
                clean, bad = walk(item)
                out[key] = clean
                if bad is not None and isinstance(key, str):
                    out[key + NULL_REASON_SUFFIX] = why(key, bad)
            return out, None
        if isinstance(node, list | tuple):
            items = [walk(item) for item in node]
            first_bad = next((bad for _, bad in items if bad is not None), None)
            return [clean for clean, _ in items], first_bad
        return node, None

    return walk(value)[0]


def _np_floating() -> type:
    """numpy's float base class when numpy is loaded (so ``np.float32`` NaNs are caught
    too), else ``float`` (this module does not import numpy itself)."""
    import sys

    numpy = sys.modules.get("numpy")
    return numpy.floating if numpy is not None else float


def print_json(value: Any, reasons: Mapping[str, str] | None = None) -> None:
    """The one way a ``--json`` printer prints: :func:`json_safe`, then strict JSON (a
    non-finite float that slipped through is a bug, raised, not printed)."""
    print(json.dumps(json_safe(value, reasons), allow_nan=False, default=str))


def require_completed(metrics: Mapping[str, Any], source: str, detail: str = "") -> None:
    """Fail in one line when no measured workflow completed: response times, throughput
    and ratios of an empty set are undefined, and printing them as 0.0 would pass for a
    result. Likewise when several measured workflows all arrived at one instant (replayed
    times): their offered rate is undefined, and the run would print it as 0."""
    measured = int(metrics.get("measured_workflows", metrics.get("workflows_completed", 1)))
    offered = metrics.get("offered_rate_wps")
    if measured > 1 and isinstance(offered, int | float) and not offered > 0:
        raise InputError(
            source,
            "offered_rate_wps",
            f"the {measured} measured workflows all arrive at one instant, so they offer no "
            "rate; spread their arrival times (--arrivals replay:FILE) or lower "
            "--warmup/--cooldown",
        )
    if measured > 0:
        return
    done = int(metrics.get("workflows_completed", 0))
    submitted = metrics.get("workflows_submitted", "?")
    if done == 0:
        why = f"none of the {submitted} workflows completed"
    else:
        why = (
            f"{done} of {submitted} workflows completed but all fall in the warm-up or "
            "cool-down window (lower --warmup/--cooldown or raise --workflows)"
        )
    raise InputError(
        source, "completed", f"0 measured workflows: {why}{'; ' + detail if detail else ''}"
    )


def check_output_path(
    path: Any, option: str, kind: str = "file", *, makes_folders: bool = False
) -> None:
    """Fail before any work, naming ``option``, when ``path`` cannot be written: ``kind``
    ``file`` (any file in an existing, writable folder; with ``makes_folders``, for writers
    that create missing folders, a folder that can be made), ``image`` (a file with a
    suffix matplotlib can write: .png, .svg, .pdf, ...) or ``folder`` (an existing folder,
    or one that can be made, writable). A long run must not end by failing to save."""
    import os
    from pathlib import Path

    p = Path(path)
    field = option.lstrip("-")
    if kind == "folder" or (makes_folders and not p.parent.exists()):
        if kind != "folder" and p.is_dir():
            raise InputError(option, field, f"{p} is a folder; give a file path")
        probe = p if kind == "folder" else p.parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            raise InputError(option, field, f"{probe} is a file, not a folder")
        _probe_write(probe, option, field)
        return
    if p.is_dir():
        raise InputError(option, field, f"{p} is a folder; give a file path")
    parent = p.parent
    if not parent.exists():
        raise InputError(option, field, f"folder {parent} does not exist; create it")
    if not parent.is_dir():
        raise InputError(option, field, f"cannot write in {parent}: not a folder")
    _probe_write(parent, option, field)
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(option, field, f"{p} is not writable")
    if kind == "image":
        _check_image_type(p, option)


def _check_image_type(p: Path, option: str) -> None:
    """A suffix matplotlib can write, or one line naming ``option``."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if p.suffix.lstrip(".").lower() not in formats:
        raise InputError(
            option,
            option.lstrip("-"),
            f"{p.name}: unknown image type; use one of .{', .'.join(sorted(formats))}",
        )


def prepare_output_path(path: Any, option: str, kind: str = "file") -> None:
    """:func:`check_output_path`, with a missing folder made first: ``--out
    results/plan.yaml`` works in a fresh checkout, as the examples in ``--help`` write under
    ``results/``. Fails before any work, naming ``option``."""
    from pathlib import Path

    p = Path(path)
    check_output_path(p, option, kind, makes_folders=True)  # the folder can be made
    if kind == "image":
        _check_image_type(p, option)  # before a folder is made for nothing
    if not p.parent.exists():
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            field = option.lstrip("-")
            raise InputError(option, field, f"cannot create {p.parent}: {exc.strerror}") from None
    check_output_path(p, option, kind)  # all of it, the image type too


def _probe_write(folder: Any, option: str, field: str) -> None:
    """Create and remove a file in ``folder``: permission bits alone say yes to root on a
    read-only or virtual file system (``/proc``), where the real write would fail."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".scalesched-probe-"):
            pass
    except OSError as exc:
        raise InputError(option, field, f"cannot write in {folder}: {exc.strerror}") from None
