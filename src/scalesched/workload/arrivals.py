"""Workflow arrival times (seconds from the start of a run, non-decreasing).

* :func:`poisson_arrivals`: exponential inter-arrival gaps of mean ``1 / rate``.
* :func:`bursty_arrivals`: a two-state Markov-modulated Poisson process (MMPP).  The
  process alternates ON and OFF periods of exponential length (means ``mean_on_s``,
  ``mean_off_s``); arrivals are Poisson at ``burst_factor × rate`` while ON and at
  ``rate_off`` while OFF, with ``rate_off`` chosen so the long-run mean rate is exactly
  ``rate``::

      rate_off = rate × (mean_on_s + mean_off_s − burst_factor × mean_on_s) / mean_off_s

  which must be >= 0, i.e. ``burst_factor <= 1 + mean_off_s / mean_on_s``.  Defaults:
  ``mean_on_s = 10 / rate`` (an ON period holds ``10 × burst_factor`` arrivals on
  average) and ``mean_off_s = mean_on_s × (burst_factor − 1)``, so the OFF rate is 0
  (an on-off / interrupted Poisson process).  The initial state is drawn from the
  stationary distribution, so the mean rate holds from time 0.
* :func:`shaped_arrivals`: a Poisson process whose rate follows a recorded shape, here
  the minute-by-minute request rate of a production hour (``ARRIVAL_SHAPES``: the Splitwise
  traces' conversation and coding services, derived by
  ``scripts/derive/derive_arrival_shapes.py``, provenance inside). The shape is stretched
  over the run's expected span ``n / rate`` and scaled so its mean rate is ``rate``: the
  offered load is the nominal one whatever the shape, and every run meets the whole shape
  (a run at real time scale would see only its first minutes). Arrivals past the span
  repeat the shape. Drawn by time rescaling: unit-rate Poisson points mapped through the
  inverse of the cumulative intensity, which is piecewise linear.
* :func:`replay_arrivals` / :func:`load_arrival_times`: given times, validated.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from scalesched.errors import InputError, read_user_text, short_repr

_SRC = "arrivals"
MAX_ARRIVAL_S = 1e9
"""Latest arrival time, seconds (about 32 years): below it the simulated clock keeps
sub-microsecond resolution."""


def _check_rate(rate: float) -> float:
    try:
        r = float(rate)
    except (TypeError, ValueError):
        raise InputError(_SRC, "rate", f"expected a number, got {rate!r}") from None
    if not math.isfinite(r) or r <= 0:
        raise InputError(
            _SRC, "rate", f"must be a positive number of workflows per second, got {rate}"
        )
    return r


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InputError(_SRC, "n", f"must be an integer >= 0, got {n!r}")
    return int(n)


def poisson_arrivals(rate: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` arrival times of a Poisson process of ``rate`` per second, starting at 0."""
    r = _check_rate(rate)
    n = _check_n(n)
    return np.cumsum(rng.exponential(1.0 / r, size=n))


def bursty_arrivals(
    rate: float,
    n: int,
    rng: np.random.Generator,
    burst_factor: float = 4.0,
    mean_on_s: float | None = None,
    mean_off_s: float | None = None,
) -> np.ndarray:
    """``n`` arrival times of an on-off MMPP whose long-run mean rate is ``rate``."""
    r = _check_rate(rate)
    n = _check_n(n)
    b = float(burst_factor)
    if not math.isfinite(b) or b < 1.0:
        raise InputError(_SRC, "burst_factor", f"must be >= 1, got {burst_factor}")
    m_on = 10.0 / r if mean_on_s is None else float(mean_on_s)
    if not math.isfinite(m_on) or m_on <= 0:
        raise InputError(_SRC, "mean_on_s", f"must be > 0, got {mean_on_s}")
    if mean_off_s is None:
        m_off = m_on * (b - 1.0)
    else:
        m_off = float(mean_off_s)
        if not math.isfinite(m_off) or m_off <= 0:
            raise InputError(_SRC, "mean_off_s", f"must be > 0, got {mean_off_s}")
    if m_off <= 0.0:  # burst_factor == 1 with the default OFF length: plain Poisson
        return poisson_arrivals(r, n, rng)
    rate_on = b * r
    rate_off = r * (m_on + m_off - b * m_on) / m_off
    if rate_off < -1e-12 * r:
        raise InputError(
            _SRC,
            "burst_factor",
            f"{b} is too high for ON/OFF means {m_on:g}/{m_off:g} s: the OFF rate would be "
            f"negative (need burst_factor <= {1.0 + m_off / m_on:g})",
        )
    rate_off = max(rate_off, 0.0)
    out: list[np.ndarray] = []
    count = 0
    t = 0.0
    on = bool(rng.random() < m_on / (m_on + m_off))
    while count < n:
        dur = float(rng.exponential(m_on if on else m_off))
        lam = rate_on if on else rate_off
        if lam > 0.0:
            k = int(rng.poisson(lam * dur))
            if k:
                out.append(t + np.sort(rng.random(k)) * dur)
                count += k
        t += dur
        on = not on
    if not out:
        return np.empty(0)
    return np.concatenate(out)[:n]


@cache
def arrival_shapes() -> dict[str, np.ndarray]:
    """Name -> the relative request rate per equal bin (mean 1) of each shipped shape."""
    text = resources.files("scalesched.workload").joinpath("data", "arrival_shapes.json")
    doc = json.loads(text.read_text())
    out = {}
    for name, entry in doc["shapes"].items():
        counts = np.asarray(entry["counts"], dtype=float)
        out[name] = counts / counts.mean()
    return out


def shaped_arrivals(
    rate: float, n: int, rng: np.random.Generator, shape: np.ndarray | str
) -> np.ndarray:
    """``n`` arrival times of a Poisson process whose rate follows ``shape`` (relative rates
    of equal bins, or the name of a shipped one) stretched over ``n / rate`` seconds, at mean
    ``rate``; past that span the shape repeats."""
    r = _check_rate(rate)
    n = _check_n(n)
    if isinstance(shape, str):
        shapes = arrival_shapes()
        if shape not in shapes:
            raise InputError(_SRC, "shape", f"unknown shape {shape!r}; use {', '.join(shapes)}")
        shape = shapes[shape]
    level = np.asarray(shape, dtype=float)
    if level.ndim != 1 or level.size == 0 or not np.all(np.isfinite(level)):
        raise InputError(_SRC, "shape", "must be a flat, non-empty sequence of finite rates")
    if np.any(level < 0) or not level.sum() > 0:
        raise InputError(_SRC, "shape", "rates must be >= 0 and not all 0")
    if n == 0:
        return np.empty(0)
    span = n / r
    edges = np.linspace(0.0, span, level.size + 1)
    # Cumulative intensity at the bin edges: n arrivals expected over one span.
    expected = np.concatenate(([0.0], np.cumsum(level))) * (n / level.sum())
    points = np.cumsum(rng.exponential(1.0, size=n))  # unit-rate Poisson
    periods, within = np.divmod(points, float(n))
    # Where the intensity is 0 the cumulative curve is flat: interp picks the bin's start,
    # and the next rising bin follows, as the process would.
    return periods * span + np.interp(within, expected, edges)


def replay_arrivals(times: Sequence[float] | np.ndarray, source: str = _SRC) -> np.ndarray:
    """Given times as an array, after checking they are finite, >= 0 and non-decreasing."""
    try:
        a = np.asarray(times, dtype=float)
    except (TypeError, ValueError):
        raise InputError(source, "times", "expected a sequence of numbers") from None
    if a.ndim != 1:
        raise InputError(source, "times", f"expected a flat sequence, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0) | (a > MAX_ARRIVAL_S))
    if bad.size:
        i = int(bad[0])
        raise InputError(
            source, f"times[{i}]", f"must be a number in [0, {MAX_ARRIVAL_S:g}] s, got {a[i]}"
        )
    dec = np.flatnonzero(np.diff(a) < 0)
    if dec.size:
        i = int(dec[0]) + 1
        raise InputError(
            source, f"times[{i}]", f"times must be sorted: {a[i]} comes after {a[i - 1]}"
        )
    return a


_TIME_COLUMNS = ("arrival", "arrival_time", "arrival_s", "time", "timestamp", "t")


def load_arrival_times(path: str | Path) -> np.ndarray:
    """Times from a text/CSV file: one time (seconds) per line, or a CSV whose header
    names a column ``arrival``/``arrival_time``/``arrival_s``/``time``/``timestamp``/``t``
    (else the first column).  Blank lines and ``#`` comments are skipped.

    A first line is a header only when it reads as one: names, none of them a number, and
    for a one-column file one of the names above. A mistyped first time (``0.5x``) is
    therefore an error naming line 1, not a header silently dropped. Times that are all
    equal are refused: they offer no rate (``n`` arrivals over 0 s)."""
    src = str(path)
    rows = _csv_rows(Path(path), src)
    col = 0
    took_header = bool(rows) and _is_header(rows[0][1])
    if took_header:
        header = [h.strip().lower() for h in rows[0][1]]
        col = next((header.index(n) for n in _TIME_COLUMNS if n in header), 0)
        rows = rows[1:]
    times: list[float] = []
    lines: list[int] = []
    for lineno, row in rows:
        lines.append(lineno)
        if col >= len(row):
            raise InputError(src, f"line {lineno}", f"missing column {col + 1}")
        try:
            times.append(float(row[col]))
        except ValueError:
            hint = _HEADER_HINT if not took_header and len(lines) == 1 else ""
            raise InputError(
                src, f"line {lineno}", f"not a number: {short_repr(row[col].strip())}{hint}"
            ) from None
    try:
        out = replay_arrivals(times, source=src)
    except InputError as e:
        i = int(e.field[len("times[") : -1]) if e.field.startswith("times[") else -1
        raise InputError(src, f"line {lines[i]}" if i >= 0 else e.field, e.message) from None
    if out.size > 1 and out[-1] == out[0]:
        raise InputError(
            src,
            "times",
            f"all {out.size} arrival times are {out[0]:g} s: they span no time, so they offer "
            "no arrival rate; give times spread over the run",
        )
    return out


_HEADER_HINT = (
    f" (a header line must name the time column: {', '.join(_TIME_COLUMNS)}; "
    "otherwise line 1 is read as a time)"
)
_NAME = re.compile(r"^[A-Za-z_][\w .()/-]*$")


def _is_header(cells: list[str]) -> bool:
    """Whether a first row is a header: names only (no number), and a known time column
    when it is the only column."""
    names = [c.strip() for c in cells]
    if not all(_NAME.match(n) for n in names):
        return False
    return len(names) > 1 or names[0].lower() in _TIME_COLUMNS


def _csv_rows(p: Path, src: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every non-blank, non-comment line; one line on a file that
    cannot be read or a field longer than the CSV reader takes."""
    text = read_user_text(src)
    rows: list[tuple[int, list[str]]] = []
    reader = csv.reader(text.splitlines())
    try:
        for lineno, row in enumerate(reader, start=1):
            if row and row[0].strip() and not row[0].lstrip().startswith("#"):
                rows.append((lineno, row))
    except csv.Error as e:
        raise InputError(src, f"line {reader.line_num}", f"unreadable CSV: {e}") from None
    return rows
