"""Measured capacity: what --load 1.0 means."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.policies import get_policy
from scalesched.runs import capacity as cap
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.run import simulate

SPEC = get_cluster("hetero-4")
WORKLOAD = "react"


@pytest.fixture(scope="module")
def measured() -> cap.CapacityResult:
    return cap.measure_capacity(SPEC, WORKLOAD, policies=("eft", "least_loaded"))


def test_capacity_is_the_best_policys_saturated_throughput(
    measured: cap.CapacityResult,
) -> None:
    assert measured.capacity_wps == max(measured.per_policy_wps.values())
    assert measured.best_policy in ("eft", "least_loaded")
    for policy, rate in measured.per_policy_wps.items():
        probes = [p for p in measured.probes if p["policy"] == policy]
        assert len(probes) == cap.FIXED_POINT_STEPS

        def estimate_after(probe: dict[str, float]) -> float:
            kept_up = probe["throughput_wps"] >= cap.KEPT_UP * probe["rate_wps"]
            return probe["rate_wps"] if kept_up else probe["throughput_wps"]

        for before, after in zip(probes, probes[1:], strict=False):
            assert after["rate_wps"] == pytest.approx(cap.OVERLOAD * estimate_after(before))
        assert rate == pytest.approx(estimate_after(probes[-1]))
        # Settled: the last two estimates agree.
        assert estimate_after(probes[-1]) == pytest.approx(estimate_after(probes[-2]), rel=0.06)


def test_below_capacity_keeps_up_far_above_does_not(measured: cap.CapacityResult) -> None:
    tables = ClusterTables(SPEC)
    n = cap.workflows_for(len(SPEC))

    def steady(rate: float) -> bool:
        jobs = build_jobs(tables, Scenario(workload=WORKLOAD, workflows=n, rate=rate, seed=77))
        m = simulate(
            SPEC,
            jobs,
            get_policy(measured.best_policy),
            tables=tables,
            warmup=cap.default_warmup(n),
            cooldown=cap.default_cooldown(n),
        ).metrics
        return bool(m["steady_state"])

    assert steady(0.7 * measured.capacity_wps)
    assert not steady(2.0 * measured.capacity_wps)


def test_load_is_a_fraction_of_the_cached_capacity(
    measured: cap.CapacityResult, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    key = cap.cache_key(SPEC, WORKLOAD)
    cap.store_result(key, measured)

    def no_measuring(*_a: object, **_k: object) -> cap.CapacityResult:
        raise AssertionError("a cached figure must not be measured again")

    monkeypatch.setattr(cap, "measure_capacity", no_measuring)
    assert cap.capacity_wps(SPEC, WORKLOAD) == measured.capacity_wps
    jobs = build_jobs(
        ClusterTables(SPEC), Scenario(workload=WORKLOAD, workflows=2000, load=0.5, seed=1)
    )
    arrivals = np.array([j.arrival for j in jobs])
    rate = (arrivals.size - 1) / (arrivals.max() - arrivals.min())
    assert rate == pytest.approx(0.5 * measured.capacity_wps, rel=0.06)


def test_the_cache_key_follows_content_not_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    src = Path("configs/workflows/support-agent.json").read_text()
    a.write_text(src)
    b.write_text(src.replace('"support-agent"', '"support-agent-2"', 1))
    assert cap.workload_fingerprint(str(a)) != cap.workload_fingerprint(str(b))
    assert cap.cache_key(SPEC, "react") != cap.cache_key(get_cluster("hetero-8"), "react")
    assert cap.cache_key(SPEC, "react") == cap.cache_key(get_cluster("hetero-4"), "react")


def test_capacity_cli_reports_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    result = CliRunner().invoke(
        app,
        [
            "capacity",
            "--residency",
            "dynamic",
            "--cluster",
            "hetero-16",
            "--workload",
            "agentic-mix",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["capacity_wps"] > 0 and payload["cluster"] == "hetero-16"
    assert payload["cached"] is True  # the shipped table holds hetero-16
    assert payload["source"] == "shipped table"
    assert "measuring" not in result.stderr


def test_capacity_cli_table_is_headed_and_cached_says_the_truth(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "measure_capacity", _canned_measure)
    args = ["capacity", "--residency", "dynamic", "--cluster", "hetero-6", "--workload", "react"]
    first = CliRunner().invoke(app, [*args, "--json"])
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["cached"] is False
    assert "measuring capacity of hetero-6 for react" in first.stderr
    monkeypatch.setattr(cap, "_memory", {})
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.stderr
    assert "quantity" in second.stdout and "description" not in second.stdout
    assert "user cache" in second.stdout and "measuring" not in second.stderr


def test_a_bad_run_length_override_is_one_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESCHED_CAPACITY_WORKFLOWS", "many")
    with pytest.raises(cap.InputError, match="SCALESCHED_CAPACITY_WORKFLOWS"):
        cap.workflows_for(4)


def test_the_fast_method_screens_then_settles_over_every_seed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reporter = cap.Reporter(bar=False)
    fast = cap.measure_capacity(SPEC, WORKLOAD, method="fast", reporter=reporter)
    notice = capsys.readouterr().err.strip().splitlines()
    assert len(notice) == 1
    assert notice[0].startswith(f"measuring capacity of hetero-4 for {WORKLOAD} (about ")
    assert notice[0].endswith("; cached afterwards)")
    assert fast.method == cap.FAST_METHOD
    screening = fast.probes[: len(cap.CAPACITY_POLICIES)]
    assert [p["policy"] for p in screening] == list(cap.CAPACITY_POLICIES)
    assert len({p["rate_wps"] for p in screening}) == 1 and all(p["seeds"] == 1 for p in screening)
    best = [p for p in fast.probes if p["policy"] == fast.best_policy]
    # The figure is the fixed point's step over every seed at the last offer.
    last_two = best[-2:]
    assert [p["seeds"] for p in last_two] == [1, len(cap.CAPACITY_SEEDS) - 1]
    assert last_two[0]["rate_wps"] == last_two[1]["rate_wps"]
    mean = sum(p["throughput_wps"] for p in last_two) / 2
    assert fast.capacity_wps == pytest.approx(cap.next_estimate(last_two[0]["rate_wps"], mean))
    assert fast.runs < cap.planned_runs("full", len(cap.CAPACITY_POLICIES)) / 2


class _CurveProber(cap._Prober):
    """A prober on made-up throughput curves, to test the fast search's steps without
    simulating: ``curves[policy](offered)`` is what the first seed delivers; each other seed
    delivers ``SECOND_SEED`` times that (seeds disagree by a few percent in real runs)."""

    SECOND_SEED = 0.96

    def __init__(self, nominal: float, curves: dict[str, Any]) -> None:
        self.nominal, self.curves = nominal, curves
        self.probes: list[dict[str, Any]] = []
        self.runs = 0
        self.on_probe = self.reporter = None

    def __call__(
        self, policy: str, rate: float, seeds: tuple[int, ...] = cap.CAPACITY_SEEDS
    ) -> float:
        first = self.curves[policy](rate)
        per_seed = [
            first if s == cap.CAPACITY_SEEDS[0] else self.SECOND_SEED * first for s in seeds
        ]
        delivered = sum(per_seed) / len(per_seed)
        self.probes.append(
            {"policy": policy, "rate_wps": rate, "throughput_wps": delivered, "seeds": len(seeds)}
        )
        return delivered


def _thrashing(capacity: float, collapse_from: float, power: float = 2.0) -> Any:
    """Keeps up to ``capacity``, delivers it up to ``collapse_from`` x it, then less and
    less (a policy that thrashes far past saturation, as eft does on hetero-48)."""

    def curve(offered: float) -> float:
        if offered <= capacity:
            return offered
        top = collapse_from * capacity
        return capacity if offered <= top else capacity * (top / offered) ** power

    return curve


def test_the_fast_method_climbs_out_of_a_collapsed_screening_to_the_fixed_point() -> None:
    # Screened at 4x what eft sustains, it delivers a seventh of it; the fixed point of
    # "offer 1.25x, take what is delivered" is the capacity itself. At 25% a step the climb
    # would still be below it when the steps run out.
    capacity = 1.0
    nominal = 4.0 / (cap.OVERLOAD * cap.START_RATIO)
    prober = _CurveProber(nominal, {"eft": _thrashing(capacity, 1.5)})
    per_policy, best = cap._fast_search(prober, ("eft",))
    mean_seed = (1 + _CurveProber.SECOND_SEED) / 2
    assert per_policy[best] == pytest.approx(capacity * mean_seed)
    offers = [p["rate_wps"] for p in prober.probes]
    assert offers[1] == pytest.approx(cap.OVERLOAD * _thrashing(capacity, 1.5)(offers[0]))
    assert offers[2] == pytest.approx(cap.CLIMB * offers[1])  # kept up: climb faster
    last_two = prober.probes[-2:]
    assert last_two[0]["rate_wps"] == last_two[1]["rate_wps"]
    assert [p["seeds"] for p in last_two] == [1, len(cap.CAPACITY_SEEDS) - 1]
    assert cap._settled(last_two[0]["rate_wps"], last_two[0]["throughput_wps"])
    assert sum(p["seeds"] for p in prober.probes) <= cap.planned_runs("fast", 1)


def test_the_fast_method_ranks_policies_at_the_settled_offer_not_the_screening_one() -> None:
    # least_loaded thrashes past 1.5x its capacity, so at the screening offer (2x) eft
    # looks best; just past saturation least_loaded sustains 10% more. The paired probe at
    # eft's settled offer finds it; a policy far behind at the screening is not probed again.
    nominal = 2.0 / (cap.OVERLOAD * cap.START_RATIO)
    curves = {
        "eft": _thrashing(1.0, 10.0),
        "least_loaded": _thrashing(1.1, 1.5, power=0.9),
        "kv_aware": _thrashing(0.5, 10.0),
    }
    prober = _CurveProber(nominal, curves)
    per_policy, best = cap._fast_search(prober, ("eft", "least_loaded", "kv_aware"))
    screening = {p["policy"]: p["throughput_wps"] for p in prober.probes[:3]}
    assert max(screening, key=lambda p: screening[p]) == "eft"
    assert best == "least_loaded"
    assert per_policy["least_loaded"] == pytest.approx(1.1 * (1 + _CurveProber.SECOND_SEED) / 2)
    assert [p["policy"] for p in prober.probes[3:]].count("kv_aware") == 0
    assert sum(p["seeds"] for p in prober.probes) <= cap.planned_runs("fast", 3)


def test_the_fast_method_ranks_a_kept_up_screening_at_its_offer() -> None:
    # eft keeps up at the screening offer and delivers 5% more (a backlog cleared in the
    # window) but settles lower; kv_aware is overloaded there, 6% below the offer. Ranked
    # by what they delivered, kv_aware would fall outside the margin; a kept-up probe only
    # says "at least the offer", so kv_aware is within it, probed at eft's settled offer,
    # and wins.
    nominal = 1.0 / (cap.OVERLOAD * cap.START_RATIO)

    def eft(offered: float) -> float:
        return 1.05 * offered if offered <= 1.0 else 0.85

    prober = _CurveProber(nominal, {"eft": eft, "kv_aware": _thrashing(0.94, 10.0)})
    per_policy, best = cap._fast_search(prober, ("eft", "kv_aware"))
    assert prober.probes[0]["throughput_wps"] * (1 - cap.SCREEN_MARGIN) > 0.94  # raw: out
    assert best == "kv_aware"
    assert per_policy["kv_aware"] == pytest.approx(0.94 * (1 + _CurveProber.SECOND_SEED) / 2)
    assert per_policy["eft"] == pytest.approx(0.85 * (1 + _CurveProber.SECOND_SEED) / 2)


def test_the_fast_methods_planned_runs_bound_a_search_that_never_settles() -> None:
    # Delivers 70% of any offer: no probe ever settles, every policy stays within the
    # margins, so the search takes every step it may.
    nominal = 1.0
    curves = {p: (lambda offered: 0.7 * offered) for p in cap.CAPACITY_POLICIES}
    prober = _CurveProber(nominal, curves)
    cap._fast_search(prober, cap.CAPACITY_POLICIES)
    runs = sum(p["seeds"] for p in prober.probes)
    assert runs == cap.planned_runs("fast", len(cap.CAPACITY_POLICIES))
    assert runs < cap.planned_runs("full", len(cap.CAPACITY_POLICIES)) / 1.5


def _canned_measure(spec: ClusterSpec, workload: str, **kwargs: Any) -> cap.CapacityResult:
    """Stands in for a measurement where only the cache is under test: announces itself
    like the real one and returns a figure that says it was measured."""
    reporter = kwargs.get("reporter")
    if reporter is not None:
        reporter.started(cap._notice(spec, workload, 300, 1), 1)
        reporter.finished()
    return cap.CapacityResult(
        cluster=spec.name,
        workload=workload,
        capacity_wps=1.25,
        best_policy="eft",
        per_policy_wps={"eft": 1.25},
        saturated_wps={"eft": 1.25},
        nominal_wps=2.0,
        runs=1,
        workflows_per_run=300,
        method=cap.FAST_METHOD,
    )


def _good_entry() -> dict[str, Any]:
    entry = _canned_measure(SPEC, WORKLOAD).to_json()
    entry.pop("probes")
    return entry


def _entry_with(**changes: Any) -> bytes:
    return json.dumps({"k": {**_good_entry(), **changes}}).encode()


DAMAGED = {
    "huge int": _entry_with(capacity_wps=10**30),
    "huge int runs": _entry_with(runs=10**40),
    "5000-digit int": b'{"k": {"capacity_wps": 1' + b"0" * 5000 + b"}}",
    "list": _entry_with(capacity_wps=[1.0]),
    "string": _entry_with(capacity_wps="3.4"),
    "boolean": _entry_with(capacity_wps=True),
    "NaN": _entry_with(capacity_wps=float("nan")),
    "Infinity": _entry_with(capacity_wps=float("inf")),
    "negative": _entry_with(capacity_wps=-3.4),
    "zero": _entry_with(capacity_wps=0.0),
    "negative per policy": _entry_with(per_policy_wps={"eft": -1.0}),
    "unknown key": _entry_with(note="hand edited"),
    "entry not an object": json.dumps({"k": 3.4}).encode(),
    "non-UTF-8 bytes": b'{"k": {"cluster": "\xff\xfe"}}',
    "deep nesting": b'{"k": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "not an object": b"[1, 2, 3]",
    "not JSON": b'{"k": {"capacity_wps": 3.4',
}


@pytest.mark.parametrize("form", list(DAMAGED))
def test_a_damaged_cache_entry_is_ignored_with_one_warning_and_rewritten(
    form: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "_warned", set())
    cluster = get_cluster("hetero-6")  # in no shipped table
    key = cap.cache_key(cluster, WORKLOAD, method=cap.FAST_METHOD)
    (tmp_path / "capacity.json").write_bytes(
        DAMAGED[form].replace(b'"k"', json.dumps(key).encode())
    )
    monkeypatch.setattr(cap, "measure_capacity", _canned_measure)
    assert cap.capacity_wps(cluster, WORKLOAD) == 1.25  # re-measured
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if line.startswith("warning:")]
    assert len(warnings) == 1 and "damaged capacity cache" in warnings[0], err
    table = json.loads((tmp_path / "capacity.json").read_text(encoding="utf-8"))
    assert table == {key: cap.CacheEntry.model_validate(table[key]).model_dump()}
    assert table[key]["capacity_wps"] == 1.25
    assert [p.name for p in tmp_path.iterdir()] == ["capacity.json"]  # no temp file left
    monkeypatch.setattr(cap, "_memory", {})
    assert cap.capacity_found(cluster, WORKLOAD).source == "user cache"
    assert capsys.readouterr().err == ""


def test_a_valid_entry_survives_a_damaged_neighbour(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "_warned", set())
    key = cap.cache_key(SPEC, WORKLOAD, method=cap.FAST_METHOD)
    table = {key: _good_entry(), "other": {**_good_entry(), "capacity_wps": float("nan")}}
    (tmp_path / "capacity.json").write_text(json.dumps(table))
    monkeypatch.setattr(cap, "measure_capacity", _canned_measure)
    found = cap.capacity_found(SPEC, WORKLOAD)
    assert found.source == "user cache" and found.entry == _good_entry()
    assert "'other'" in capsys.readouterr().err
    assert list(json.loads((tmp_path / "capacity.json").read_text())) == [key]


@pytest.mark.parametrize("stamp", [{"simulator": "0123456789ab"}, {"simulator": None}])
def test_a_figure_another_simulator_measured_is_measured_again(
    stamp: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A cached capacity defines --load only for the simulator that measured it: one of
    another revision (or of none: cached before figures were stamped) is measured again,
    with one note, and replaced in the file."""
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "_warned", set())
    key = cap.cache_key(SPEC, WORKLOAD, method=cap.FAST_METHOD)
    old = {**_good_entry(), "capacity_wps": 9.0, **stamp}
    (tmp_path / "capacity.json").write_text(json.dumps({key: old}))
    monkeypatch.setattr(cap, "measure_capacity", _canned_measure)
    found = cap.capacity_found(SPEC, WORKLOAD)
    assert found.source == "measured now" and found.entry["capacity_wps"] == 1.25
    notes = capsys.readouterr().err.splitlines()
    assert len([n for n in notes if "another simulator revision" in n]) == 1, notes
    table = json.loads((tmp_path / "capacity.json").read_text())
    assert table[key]["simulator"] == cap.SIMULATOR_REVISION
    assert table[key]["capacity_wps"] == 1.25


def test_the_shipped_table_answers_where_the_user_figure_is_of_another_simulator(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stale user figure no longer shadows the shipped one (the yardstick of the docs)."""
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "_warned", set())
    spec = get_cluster("hetero-16")
    key = cap.cache_key(spec, "agentic-mix")
    shipped = cap.shipped_entry(key)
    assert shipped is not None
    stale = {**shipped, "capacity_wps": 9.0, "simulator": "0123456789ab"}
    (tmp_path / "capacity.json").write_text(json.dumps({key: stale}))
    found = cap.capacity_found(spec, "agentic-mix")
    assert found.source == "shipped table"
    assert found.entry["capacity_wps"] == shipped["capacity_wps"]


def test_an_unwritable_cache_is_a_warning_not_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "measure_capacity", _canned_measure)
    found = cap.capacity_found(get_cluster("hetero-6"), WORKLOAD)
    assert found.entry["capacity_wps"] == 1.25 and found.source == "measured now"
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "cannot write the capacity cache" in warnings[0]


def test_a_large_cluster_is_scaled_from_the_largest_cached_one_of_its_mix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    big = get_cluster("hetero-1024")
    assert cap.sub_cluster(big, 64).servers == get_cluster("hetero-64").servers
    assert cap.sub_cluster(big, 64).name == "hetero-64"
    assert cap.scale_bases(big)[0] == 512 and cap.scale_bases(big)[-1] == 64
    assert cap.scale_bases(get_cluster("hetero-96")) == []  # measured, not scaled
    assert cap.scale_bases(get_cluster("hetero-130")) == []  # 33/33/32/32: no exact copy
    with pytest.raises(ValueError, match="mix"):
        cap.sub_cluster(get_cluster("hetero-130"), 65)

    def no_measuring(*_a: object, **_k: object) -> cap.CapacityResult:
        raise AssertionError("hetero-256 is in the shipped table: scale it")

    monkeypatch.setattr(cap, "measure_capacity", no_measuring)
    found = cap.capacity_found(big, "agentic-mix")
    base = cap.lookup(get_cluster("hetero-256"), "agentic-mix")
    assert base is not None and base.source == "shipped table"
    assert found.entry["capacity_wps"] == pytest.approx(4 * base.entry["capacity_wps"])
    assert found.entry["scaled_from"].startswith("hetero-256")
    assert found.entry["scale_factor"] == 4.0


def test_an_unshipped_large_cluster_measures_its_smallest_base_and_caches_both(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    measured: list[str] = []

    def measure(spec: ClusterSpec, workload: str, **kwargs: Any) -> cap.CapacityResult:
        measured.append(spec.name)
        return _canned_measure(spec, workload, **kwargs)

    monkeypatch.setattr(cap, "measure_capacity", measure)
    big = get_cluster("homogeneous-256")
    assert cap.capacity_wps(big, WORKLOAD) == pytest.approx(4 * 1.25)
    assert measured == ["homogeneous-64"]
    small = cap.lookup(get_cluster("homogeneous-64"), WORKLOAD)
    assert small is not None and small.source == "user cache"


def test_ignoring_the_shipped_table_measures_a_shipped_cluster_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SCALESCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cap, "_memory", {})
    monkeypatch.setattr(cap, "measure_capacity", _canned_measure)
    spec = get_cluster("hetero-16")
    key = cap.cache_key(spec, "agentic-mix")
    shipped = cap.shipped_entry(key)
    assert shipped is not None and shipped["capacity_wps"] != 1.25
    assert cap.capacity_found(spec, "agentic-mix").source == "shipped table"
    with cap.ignoring_shipped_table():
        assert cap.shipped_entry(key) is None
        found = cap.capacity_found(spec, "agentic-mix", reporter=cap.Reporter(bar=False))
        assert found.source == "measured now" and found.entry["capacity_wps"] == 1.25
    assert cap.shipped_entry(key) == shipped
    # the figure found without the table is not remembered past the block
    assert cap.capacity_found(spec, "agentic-mix").source != "memory"


def test_a_probe_that_completes_nothing_steps_down_instead_of_to_zero() -> None:
    """A collapsed probe (no completion in its window) reads as far past saturation: its
    figure is 0, and the next offer a share of this one, never a rate of 0 that no probe
    can run."""
    assert cap.next_estimate(8.0, 0.0) == 0.0
    assert 0 < cap._next_offer(8.0, 0.0) == pytest.approx(cap.COLLAPSED_STEP * 8.0)
    assert cap._next_offer(8.0, 3.0) == pytest.approx(cap.OVERLOAD * 3.0)
    assert cap._next_offer(8.0, 8.0) == pytest.approx(cap.OVERLOAD * 8.0)
