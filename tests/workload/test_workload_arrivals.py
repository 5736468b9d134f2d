"""Arrival processes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload.arrivals import (
    arrival_shapes,
    bursty_arrivals,
    load_arrival_times,
    poisson_arrivals,
    replay_arrivals,
    shaped_arrivals,
)


def dispersion(times: np.ndarray, window: float) -> float:
    """Index of dispersion (variance / mean) of counts in windows of ``window`` seconds."""
    counts = np.bincount((times // window).astype(int))
    return float(counts.var() / counts.mean())


def test_poisson_rate_and_shape() -> None:
    rng = np.random.default_rng(0)
    t = poisson_arrivals(5.0, 20000, rng)
    assert t.shape == (20000,) and t[0] > 0 and np.all(np.diff(t) >= 0)
    assert abs(len(t) / t[-1] - 5.0) / 5.0 < 0.03
    assert 0.85 < dispersion(t, 2.0) < 1.15
    assert poisson_arrivals(1.0, 0, rng).shape == (0,)


def test_poisson_is_deterministic() -> None:
    a = poisson_arrivals(2.0, 100, np.random.default_rng(9))
    b = poisson_arrivals(2.0, 100, np.random.default_rng(9))
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("kw", "rate"),
    [({}, 2.0), ({"burst_factor": 3.0, "mean_on_s": 4.0, "mean_off_s": 20.0}, 0.5)],
)
def test_bursty_mean_rate_and_overdispersion(kw: dict[str, float], rate: float) -> None:
    rates, disp = [], []
    for seed in range(4):
        t = bursty_arrivals(rate, 20000, np.random.default_rng(seed), **kw)
        assert t.shape == (20000,) and np.all(np.diff(t) >= 0) and t[0] >= 0
        rates.append(len(t) / t[-1])
        disp.append(dispersion(t, 5.0 / rate))
    assert abs(np.mean(rates) - rate) / rate < 0.08
    assert min(disp) > 2.0  # far burstier than Poisson (index of dispersion 1)


def test_bursty_validation() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(InputError) as ei:
        bursty_arrivals(1.0, 10, rng, burst_factor=10.0, mean_on_s=5.0, mean_off_s=5.0)
    assert ei.value.field == "burst_factor"
    with pytest.raises(InputError):
        bursty_arrivals(1.0, 10, rng, burst_factor=0.5)
    with pytest.raises(InputError):
        bursty_arrivals(1.0, 10, rng, mean_on_s=0.0)
    # burst factor 1: plain Poisson at the same rate
    t = bursty_arrivals(3.0, 5000, rng, burst_factor=1.0)
    assert abs(len(t) / t[-1] - 3.0) / 3.0 < 0.06


@pytest.mark.parametrize("name", ["azure-conv", "azure-code"])
def test_a_shaped_process_keeps_the_offered_rate_and_follows_its_shape(name: str) -> None:
    shape = arrival_shapes()[name]
    rate, n = 2.0, 40000
    t = shaped_arrivals(rate, n, np.random.default_rng(1), name)
    assert t.shape == (n,) and np.all(np.diff(t) >= 0) and t[0] >= 0
    assert abs(n / t[-1] - rate) / rate < 0.03  # the offered load is the nominal one
    span = n / rate  # the shape's bins, stretched over the expected span
    counts = np.histogram(t, bins=shape.size, range=(0.0, span))[0]
    expected = shape / shape.sum() * n
    assert np.corrcoef(counts, expected)[0, 1] > 0.97
    # Poisson noise per bin; the last bin is cut where the n-th arrival falls.
    assert np.max(np.abs(counts - expected)[:-1] / np.sqrt(expected[:-1] + 1)) < 5
    assert np.array_equal(t, shaped_arrivals(rate, n, np.random.default_rng(1), name))


def test_the_shipped_shapes_are_a_production_hour_with_their_provenance() -> None:
    shapes = arrival_shapes()
    assert set(shapes) == {"azure-conv", "azure-code"}
    for level in shapes.values():
        assert 50 <= level.size <= 60 and abs(level.mean() - 1.0) < 1e-12
    assert shapes["azure-conv"].max() < 2 < shapes["azure-code"].max()  # a hump; bursts


def test_a_shape_with_idle_bins_places_no_arrival_in_them() -> None:
    t = shaped_arrivals(1.0, 2000, np.random.default_rng(0), np.array([1.0, 0.0, 1.0, 0.0]))
    phase = (t % 2000.0) // 500.0  # bins of 500 s over a 2000 s span
    assert set(np.unique(phase)) <= {0.0, 2.0}


@pytest.mark.parametrize(
    ("shape", "needle"),
    [
        ("nope", "unknown shape 'nope'"),
        (np.array([]), "non-empty"),
        (np.array([-1.0, 2.0]), ">= 0"),
        (np.zeros(3), "not all 0"),
        (np.array([1.0, np.nan]), "finite"),
    ],
)
def test_bad_shapes_are_refused(shape: object, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        shaped_arrivals(1.0, 10, np.random.default_rng(0), shape)  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_rate(rate: float) -> None:
    for fn in (poisson_arrivals, bursty_arrivals):
        with pytest.raises(InputError) as ei:
            fn(rate, 10, np.random.default_rng(0))
        assert ei.value.field == "rate"


def test_bad_n() -> None:
    with pytest.raises(InputError) as ei:
        poisson_arrivals(1.0, -1, np.random.default_rng(0))
    assert ei.value.field == "n"


def test_replay_validation() -> None:
    assert replay_arrivals([0, 0, 1.5]).tolist() == [0.0, 0.0, 1.5]
    assert replay_arrivals([]).shape == (0,)
    with pytest.raises(InputError) as ei:
        replay_arrivals([0.0, 2.0, 1.0])
    assert ei.value.field == "times[2]"
    with pytest.raises(InputError) as ei:
        replay_arrivals([-1.0, 2.0])
    assert ei.value.field == "times[0]"
    with pytest.raises(InputError):
        replay_arrivals([0.0, float("nan")])
    with pytest.raises(InputError):
        replay_arrivals([[0.0, 1.0]])  # type: ignore[list-item]


def test_load_arrival_times(tmp_path: Path) -> None:
    p = tmp_path / "plain.txt"
    p.write_text("# trace\n0.0\n0.5\n\n1.25\n")
    assert load_arrival_times(p).tolist() == [0.0, 0.5, 1.25]
    p = tmp_path / "trace.csv"
    p.write_text("request_id,timestamp,tokens\nr1,0.1,5\nr2,0.2,6\nr3,3.0,7\n")
    assert load_arrival_times(p).tolist() == [0.1, 0.2, 3.0]
    p.write_text("a,b\n1.0,2\n0.5,3\n")  # no known column name: the first column
    with pytest.raises(InputError) as ei:
        load_arrival_times(p)
    assert ei.value.field == "line 3" and ei.value.source == str(p)
    p.write_text("0.1\nabc\n")
    with pytest.raises(InputError) as ei:
        load_arrival_times(p)
    assert ei.value.field == "line 2"
    with pytest.raises(InputError) as ei:
        load_arrival_times(tmp_path / "missing.csv")
    assert ei.value.field == "file"


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("0.5x\n1\n2\n", "line 1", "a header line must name the time column"),
        ("t;x\n1\n2\n", "line 1", "not a number"),
        ("0\n0\n0\n", "times", "span no time"),
        ("0\n" + "9" * 200_000 + "\n", "line 2", "field larger than field limit"),
        ("arrival\n1\n" + "x" * 5000 + "\n", "line 3", "not a number"),
    ],
)
def test_replay_file_mistakes_are_one_short_line(
    tmp_path: Path, text: str, field: str, words: str
) -> None:
    path = tmp_path / "times.csv"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_arrival_times(path)
    message = str(info.value)
    assert f"{path}: {field}" in message and words in message, message
    assert len(message) < 400  # a hostile field is not echoed whole


def test_replay_headers_that_read_as_headers_are_still_taken(tmp_path: Path) -> None:
    path = tmp_path / "times.csv"
    for text in ("arrival\n0\n1.5\n", "id,timestamp\na,0\nb,1.5\n", "job,other\n0,x\n1.5,y\n"):
        path.write_text(text)
        assert load_arrival_times(path).tolist() == [0.0, 1.5], text
