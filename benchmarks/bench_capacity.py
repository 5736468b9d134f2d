"""Capacity benchmark: the fast method against the full one, side by side.

Three parts, each a command of its own (each a few minutes of one core at most):

``accuracy``: for each setting (cluster/workload), the fast method's figure and wall time
against the full method's. The full figure is the shipped table's (measured by
``scripts/derive/measure_capacity.py`` with the full method; its recorded time is from that
measurement, possibly on other load) unless ``--remeasure-full`` measures it again here.

``scaling``: the scaling rule checked on the shipped full measurements: the capacity of
hetero-N predicted by N / 64 x hetero-64's (and N / 128 x hetero-128's) against hetero-N's
own measurement.

``cold``: wall time of a first figure with an empty user cache and the shipped table
hidden (the unshipped path), for clusters of any size; the full method's time there is
estimated from one timed full-length run (``--full-fraction`` of its workflows), times the
30 runs the full method makes, and printed as an estimate.

Examples::

    python benchmarks/bench_capacity.py accuracy \\
        --settings hetero-16/agentic-mix,hetero-16/react,hetero-16/deep-research,\\
hetero-32/agentic-mix,hetero-48/agentic-mix,hetero-64/agentic-mix
    python benchmarks/bench_capacity.py scaling
    python benchmarks/bench_capacity.py cold --clusters hetero-256,hetero-1024,homogeneous-256
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from scalesched.cluster import get_cluster
from scalesched.runs import capacity as cap

DEFAULT_SETTINGS = (
    "hetero-16/agentic-mix,hetero-16/react,hetero-16/deep-research,"
    "hetero-32/agentic-mix,hetero-48/agentic-mix,hetero-64/agentic-mix"
)


def _full_entry(cluster: str, workload: str) -> dict[str, object] | None:
    return cap.shipped_entry(cap.cache_key(get_cluster(cluster), workload))


def accuracy(settings: str, remeasure_full: bool) -> None:
    print("| setting | full wf/s | fast wf/s | error | full s | fast s | speed-up | fast runs |")
    print("|---|---|---|---|---|---|---|---|")
    for setting in settings.split(","):
        cluster, workload = setting.split("/", 1)
        spec = get_cluster(cluster)
        full = _full_entry(cluster, workload)
        if remeasure_full or full is None:
            full = cap.measure_capacity(spec, workload, method="full").to_json()
        fast = cap.measure_capacity(spec, workload, method="fast")
        f_wps, f_s = float(full["capacity_wps"]), float(full["measured_s"])  # type: ignore[arg-type]
        print(
            f"| {setting} | {f_wps:.3f} | {fast.capacity_wps:.3f} | "
            f"{100 * (fast.capacity_wps / f_wps - 1):+.1f}% | {f_s:.0f} | {fast.measured_s:.0f} | "
            f"{f_s / fast.measured_s:.1f}x | {sum(p['seeds'] for p in fast.probes)} |",
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
