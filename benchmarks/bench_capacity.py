"""Capacity benchmark: the fast method against the full one, side by side.

Three parts, each a command of its own (each a few minutes of one core at most):

``accuracy``: for each setting (cluster/workload), the fast method's figure and wall time
against the full method's. The full figure is the shipped table's (measured by
``scripts/derive/measure_capacity.py`` with the full method; its recorded time is from that
measurement, possibly on other load) unless the table lacks it or ``--remeasure-full`` is
given: then the full method runs here, in the same process, before the fast one, and the
``full settled`` column says whether its best policy's fixed point had settled (last probe
overloaded, estimate moved less than 3%; "-" for a shipped figure, whose probes are not
kept). A cluster is a preset, a YAML file, or ``mix-M-16`` for EnvSched's 16-server mix M
(``scalesched.env.settings.MIXES``: h100-rich, l4-edge, cpu-heavy), as the shipped table
names them. The default settings are fifteen mixes on agentic-mix, five of them measured
with the full method here (the whole run: about 15 min on a loaded 2-core machine).

``scaling``: the scaling rule checked on the shipped full measurements: the capacity of
hetero-N predicted by N / 64 x hetero-64's (and N / 128 x hetero-128's) against hetero-N's
own measurement.

``cold``: wall time of a first figure with an empty user cache and the shipped table
hidden (the unshipped path), for clusters of any size; the full method's time there is
estimated from one timed full-length run (``--full-fraction`` of its workflows), times the
30 runs the full method makes, and printed as an estimate.

Examples::

    python benchmarks/bench_capacity.py accuracy
    python benchmarks/bench_capacity.py accuracy --settings mix-l4-edge-16/plan-execute
    python benchmarks/bench_capacity.py scaling
    python benchmarks/bench_capacity.py cold --clusters hetero-256,hetero-1024,homogeneous-256
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.runs import capacity as cap

MIXES = (
    # the presets and shipped files (full figures shipped)
    "hetero-16,hetero-32,hetero-48,hetero-64,"
    "configs/clusters/a100-lab.yaml,configs/clusters/edge-l4-cpu.yaml,"
    "configs/clusters/example-lab.yaml,mix-h100-rich-16,mix-l4-edge-16,mix-cpu-heavy-16,"
    # measured with the full method here: one fast server among slow ones, A100-heavy,
    # a single CPU box, homogeneous
    "configs/train/clusters/skewed-1h-16.yaml,configs/clusters/a100-heavy-40.yaml,"
    "configs/clusters/few-cpu-16.yaml,homogeneous-16,homogeneous-16:h100-80g-x4"
)
DEFAULT_SETTINGS = ",".join(f"{m}/agentic-mix" for m in MIXES.split(","))


def _cluster(name: str) -> ClusterSpec:
    """A preset, a YAML file, or ``mix-M-16``: EnvSched's mix M, as the shipped table has it."""
    from scalesched.env.settings import MIXES as ENV_MIXES
    from scalesched.env.settings import EnvSetting

    m = re.fullmatch(r"mix-(.+)-16", name)
    if m and m.group(1) in ENV_MIXES:
        return EnvSetting("agentic-mix", 0.7, m.group(1), 50).cluster()
    return get_cluster(name)


def _full_entry(cluster: str, workload: str) -> dict[str, object] | None:
    return cap.shipped_entry(cap.cache_key(_cluster(cluster), workload))


def _full_settled(result: cap.CapacityResult) -> str:
    """Whether the full method's best policy ended at its fixed point: the last probe
    overloaded and the estimate it gave within 3% of the one before (the full method stops
    after five steps whether or not it got there)."""
    rows = [p for p in result.probes if p["policy"] == result.best_policy]
    estimates = [cap.next_estimate(p["rate_wps"], p["throughput_wps"]) for p in rows]
    last = rows[-1]
    overloaded = last["throughput_wps"] < cap.KEPT_UP * last["rate_wps"]
    moved = abs(estimates[-1] / estimates[-2] - 1)
    return (
        "yes"
        if overloaded and moved < 0.03
        else f"no ({'overloaded' if overloaded else 'kept up'}, {100 * moved:.0f}%)"
    )


def accuracy(settings: str, remeasure_full: bool) -> None:
    """One row per setting. The cost that does not depend on the machine's load is the
    count of runs (``speed-up``: the full method's 30 over the fast method's); wall times
    are this machine's now, except a shipped full figure's (marked *), timed when the table
    was measured, under whatever load there was then."""
    print(
        "| setting | full wf/s | fast wf/s | error | full runs | fast runs | speed-up | "
        "full s | fast s | full settled |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for setting in settings.split(","):
        cluster, workload = setting.rsplit("/", 1)
        spec = _cluster(cluster)
        full = _full_entry(cluster, workload)
        settled, mark = "-", "*"
        if remeasure_full or full is None:
            result = cap.measure_capacity(spec, workload, method="full")
            full, settled, mark = result.to_json(), _full_settled(result), ""
        fast = cap.measure_capacity(spec, workload, method="fast")
        f_wps, f_s = float(full["capacity_wps"]), float(full["measured_s"])  # type: ignore[arg-type]
        f_runs = cap.planned_runs("full", len(cap.CAPACITY_POLICIES))
        runs = sum(p["seeds"] for p in fast.probes)
        name = Path(cluster).stem if cluster.endswith((".yaml", ".yml")) else cluster
        print(
            f"| {name}/{workload} | {f_wps:.3f} | {fast.capacity_wps:.3f} | "
            f"{100 * (fast.capacity_wps / f_wps - 1):+.1f}% | {f_runs} | {runs} | "
            f"{f_runs / runs:.1f}x | {f_s:.0f}{mark} | {fast.measured_s:.0f} | {settled} |",
            flush=True,
        )


def scaling() -> None:
    print("| cluster | measured (full) | scaled from hetero-64 | error | from hetero-128 | error |")
    print("|---|---|---|---|---|---|")
    base64 = _full_entry("hetero-64", "agentic-mix")
    base128 = _full_entry("hetero-128", "agentic-mix")
    assert base64 is not None and base128 is not None
    for n in (96, 128, 256):
        own = _full_entry(f"hetero-{n}", "agentic-mix")
        if own is None:
            continue
        measured = float(own["capacity_wps"])  # type: ignore[arg-type]
        s64 = n / 64 * float(base64["capacity_wps"])  # type: ignore[arg-type]
        s128 = n / 128 * float(base128["capacity_wps"])  # type: ignore[arg-type]
        cell128 = f"{s128:.2f} | {100 * (s128 / measured - 1):+.1f}%" if n > 128 else "- | -"
        print(
            f"| hetero-{n} | {measured:.2f} | {s64:.2f} | {100 * (s64 / measured - 1):+.1f}% | "
            f"{cell128} |"
        )


def _time_one_full_run(cluster: str, workload: str, fraction: float) -> float:
    """Seconds of one full-method run at ``cluster``, from a ``fraction`` of its workflows,
    offered 1.25x the fast capacity (where the full method's later probes run)."""
    from scalesched.cluster.tables import ClusterTables
    from scalesched.runs.setup import Scenario, prepare, run

    spec = get_cluster(cluster)
    n = cap.workflows_for(len(spec))
    part = max(200, int(n * fraction))
    rate = cap.OVERLOAD * cap.capacity_wps(spec, workload)
    tables = ClusterTables(spec)
    wall = time.perf_counter()
    setup = prepare(tables, Scenario(workload=workload, workflows=part, rate=rate, seed=20260))
    run(setup, "eft", warmup=cap.default_warmup(part), cooldown=cap.default_cooldown(part))
    return (time.perf_counter() - wall) * n / part


def cold(clusters: str, workload: str, fraction: float) -> None:
    print("| cluster | fast wf/s | how | first figure s | full method s (estimated) | speed-up |")
    print("|---|---|---|---|---|---|")
    for cluster in clusters.split(","):
        spec = get_cluster(cluster)
        with tempfile.TemporaryDirectory() as empty, cap.ignoring_shipped_table():
            os.environ["SCALESCHED_CACHE_DIR"] = empty
            wall = time.perf_counter()
            found = cap.capacity_found(spec, workload, reporter=cap.Reporter(bar=False))
            first = time.perf_counter() - wall
            full_s = cap.planned_runs("full", 3) * _time_one_full_run(cluster, workload, fraction)
        how = found.entry.get("scaled_from") or "measured"
        print(
            f"| {cluster} | {found.entry['capacity_wps']:.2f} | {how} | {first:.0f} | "
            f"{full_s:.0f} | {full_s / first:.0f}x |",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="part", required=True)
    acc = sub.add_parser("accuracy")
    acc.add_argument("--settings", default=DEFAULT_SETTINGS)
    acc.add_argument("--remeasure-full", action="store_true")
    sub.add_parser("scaling")
    cold_p = sub.add_parser("cold")
    cold_p.add_argument("--clusters", default="hetero-256,hetero-1024,homogeneous-256")
    cold_p.add_argument("--workload", default="agentic-mix")
    cold_p.add_argument("--full-fraction", type=float, default=0.1)
    args = ap.parse_args()
    if args.part == "accuracy":
        accuracy(args.settings, args.remeasure_full)
    elif args.part == "scaling":
        scaling()
    else:
        cold(args.clusters, args.workload, args.full_fraction)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
