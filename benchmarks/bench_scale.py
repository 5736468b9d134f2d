"""Scale benchmark (issue 16 item 5): events/s, decisions/s, peak RSS and wall time of whole
simulator runs over cluster sizes x run lengths x policies.

Every cell (policy, N, workflows) runs in a subprocess of its own, so its peak RSS is its
own: the parent reads the child's ``ru_maxrss`` and CPU time from ``os.wait4``. The child
runs the library's own chain (``scalesched.runs.setup.prepare`` + ``run``, as
``scalesched simulate`` does): ``hetero-N`` with ``agentic-mix``, streamed from
``STREAM_FROM`` workflows up, the study's warm-up/cool-down window.

The arrival rate: ``--load`` of the measured capacity where the capacity of ``hetero-N`` is
cached (the shipped table or the user cache), otherwise ``--rate-per-server`` x N
workflows/s (0.13 N is about load 0.7 on the measured hetero presets, as bench_sim and
bench_policy use); a benchmark must not start a capacity search. The CSV says which.

Example (on a shared machine prefix ``nice -n 10``)::

    python benchmarks/bench_scale.py --sizes 16,256,1024,4096 \\
        --workflows 1000,10000,100000 --policies eft,scale --out results.csv
    python benchmarks/bench_scale.py --print-table results.csv   # Markdown from CSVs
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

WORKLOAD = "agentic-mix"

FIELDS = [
    "policy",
    "n_servers",
    "workflows",
    "status",
    "rate_wps",
    "rate_source",
    "streamed",
    "tasks",
    "events",
    "decisions",
    "run_wall_s",
    "run_cpu_s",
    "events_per_cpu_s",
    "decisions_per_cpu_s",
    "events_per_wall_s",
    "decisions_per_wall_s",
    "process_wall_s",
    "process_cpu_s",
    "peak_rss_mb",
    "steady_state",
    "mean_in_system",
    "avg_response_time_s",
]


def _rss_mb() -> float:
    """Current resident set of this process (MB), for progress lines."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run_cell(
    policy: str,
    n: int,
    workflows: int,
    *,
    load: float,
    rate_per_server: float,
    seed: int,
    progress_every: int,
) -> dict[str, Any]:
    """One run in this process: the child side of a cell. Returns the counters and times."""
    from scalesched.cluster import get_cluster
    from scalesched.policies import get_policy
    from scalesched.runs.capacity import cache_key, cached_entry
    from scalesched.runs.setup import Scenario, prepare, run, streams_by_default

    spec = get_cluster(f"hetero-{n}")
    entry = cached_entry(cache_key(spec, WORKLOAD))
    if entry is not None:
        scenario = Scenario(workload=WORKLOAD, workflows=workflows, load=load, seed=seed)
        rate = load * float(entry["capacity_wps"])
        source = f"load {load:g} of measured capacity {float(entry['capacity_wps']):.3g}"
    else:
        rate = rate_per_server * n
        scenario = Scenario(workload=WORKLOAD, workflows=workflows, rate=rate, seed=seed)
        source = f"{rate_per_server:g} x N (capacity not measured)"
    scheduler = get_policy(policy)
    if "torch" in sys.modules:  # a learned policy: one thread, like every torch use here
        import torch

        torch.set_num_threads(1)
    setup = prepare(spec, scenario)
    done = [0]
    wall0 = time.perf_counter()
    cpu0 = time.process_time()

    def on_done(_job: int) -> None:
        done[0] += 1
        if progress_every and done[0] % progress_every == 0:
            print(
                f"[{policy} N={n} W={workflows}] {done[0]} done, "
                f"wall {time.perf_counter() - wall0:.0f} s, "
                f"cpu {time.process_time() - cpu0:.0f} s, rss {_rss_mb():.0f} MB",
                file=sys.stderr,
                flush=True,
            )

    result = run(setup, scheduler, on_workflow_done=on_done)
    run_wall = time.perf_counter() - wall0
    run_cpu = time.process_time() - cpu0
    m = result.metrics
    events, decisions = int(m["events"]), int(m["decisions"])
    return {
        "policy": policy,
        "n_servers": n,
        "workflows": workflows,
        "status": "ok",
        "rate_wps": round(rate, 4),
        "rate_source": source,
        "streamed": streams_by_default(scenario),
        "tasks": int(m["tasks_completed"]),
        "events": events,
        "decisions": decisions,
        "run_wall_s": round(run_wall, 2),
        "run_cpu_s": round(run_cpu, 2),
        "events_per_cpu_s": round(events / run_cpu) if run_cpu > 0 else 0,
        "decisions_per_cpu_s": round(decisions / run_cpu) if run_cpu > 0 else 0,
        "events_per_wall_s": round(events / run_wall) if run_wall > 0 else 0,
        "decisions_per_wall_s": round(decisions / run_wall) if run_wall > 0 else 0,
        "steady_state": m["steady_state"],
        "mean_in_system": round(float(m["mean_in_system"]), 1),
        "avg_response_time_s": round(float(m["avg_response_time_s"]), 2),
    }


def spawn_cell(policy: str, n: int, workflows: int, args: argparse.Namespace) -> dict[str, Any]:
    """Run one cell in a child process; its own peak RSS and CPU time come from wait4."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--cell",
        f"{policy},{n},{workflows}",
        "--load",
        str(args.load),
        "--rate-per-server",
        str(args.rate_per_server),
        "--seed",
        str(args.seed),
        "--progress-every",
        str(args.progress_every),
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    deadline = None if args.cell_timeout <= 0 else start + args.cell_timeout
    status = "ok"
    while True:
        pid, wstatus, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if deadline is not None and time.perf_counter() > deadline:
            proc.kill()
            status = f"killed after {args.cell_timeout:g} s"
            pid, wstatus, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.5)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(wstatus)
    out = proc.stdout.read() if proc.stdout is not None else ""
    if proc.stdout is not None:
        proc.stdout.close()
    row: dict[str, Any] = {"policy": policy, "n_servers": n, "workflows": workflows}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if status == "ok" and proc.returncode == 0 and lines:
        row.update(json.loads(lines[-1]))
    elif status == "ok":
        status = f"failed (exit {proc.returncode})"
    row["status"] = status
    row["process_wall_s"] = round(wall, 2)
    row["process_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    row["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # KB on Linux
    return row


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table of docs/benchmarks.md from result rows (CSV strings or numbers)."""

    def num(v: Any, fmt: str = ",.0f") -> str:
        try:
            return format(float(v), fmt)
        except (TypeError, ValueError):
            return "" if v is None else str(v)

    head = (
        "| policy | N | workflows | rate (wps) | tasks | events | decisions | run CPU s "
        "| run wall s | events / CPU s | decisions / CPU s | events / wall s | peak RSS MB "
        "| mean in system | steady |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    out = [head]
    for r in rows:
        if r.get("status", "ok") != "ok":
            out.append(
                f"| {r['policy']} | {r['n_servers']} | {num(r['workflows'])} | "
                f"{r['status']} | | | | | {num(r.get('process_wall_s'), '.0f')} | | | | "
                f"{num(r.get('peak_rss_mb'), '.0f')} | | |"
            )
            continue
        out.append(
            f"| {r['policy']} | {r['n_servers']} | {num(r['workflows'])} | "
            f"{num(r['rate_wps'], '.3g')} | {num(r['tasks'])} | {num(r['events'])} | "
            f"{num(r['decisions'])} | {num(r['run_cpu_s'], '.1f')} | "
            f"{num(r['run_wall_s'], '.1f')} | {num(r['events_per_cpu_s'])} | "
            f"{num(r['decisions_per_cpu_s'])} | {num(r['events_per_wall_s'])} | "
            f"{num(r['peak_rss_mb'], '.0f')} | {num(r['mean_in_system'])} | "
            f"{r['steady_state']} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="16,256,1024", help="cluster sizes N (hetero-N), comma-separated"
    )
    parser.add_argument(
        "--workflows", default="1000,10000", help="run lengths in workflows, comma-separated"
    )
    parser.add_argument(
        "--policies",
        default="eft",
        help="policies by registered name (eft, scale, ...), comma-separated; every "
        "policy runs every size x length",
    )
    parser.add_argument(
        "--load",
        type=float,
        default=0.7,
        help="arrival rate as a fraction of the measured capacity, where hetero-N has one",
    )
    parser.add_argument(
        "--rate-per-server",
        type=float,
        default=0.13,
        help="workflows/s per server where hetero-N has no measured capacity (0.13: about "
        "load 0.7 on the measured presets)",
    )
    parser.add_argument("--seed", type=int, default=0, help="workload and policy seed")
    parser.add_argument(
        "--out", type=Path, default=None, help="CSV to write (one row per cell, appended)"
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=0.0,
        help="kill a cell after this many seconds and record it as killed (0: no limit)",
    )
    parser.add_argument(
        "--progress-every",
        type=int,
        default=0,
        help="print progress (workflows done, wall, CPU, RSS) to stderr every this many "
        "finished workflows (0: never)",
    )
    parser.add_argument(
        "--print-table",
        nargs="+",
        type=Path,
        default=None,
        metavar="CSV",
        help="print the Markdown table of these result CSVs and exit (runs nothing)",
    )
    parser.add_argument(
        "--cell", default=None, help=argparse.SUPPRESS
    )  # internal: POLICY,N,WORKFLOWS, run in this process, print one JSON line
    args = parser.parse_args()

    if args.print_table is not None:
        rows: list[dict[str, Any]] = []
        for path in args.print_table:
            with path.open(newline="") as fh:
                rows.extend(csv.DictReader(fh))
        print(markdown(rows))
        return
    if args.cell is not None:
        policy, n, w = args.cell.split(",")
        row = run_cell(
            policy,
            int(n),
            int(w),
            load=args.load,
            rate_per_server=args.rate_per_server,
            seed=args.seed,
            progress_every=args.progress_every,
        )
        print(json.dumps(row), flush=True)
        return

    results = []
    new_file = args.out is not None and not args.out.exists()
    for policy in args.policies.split(","):
        for n in _ints(args.sizes):
            for w in _ints(args.workflows):
                row = spawn_cell(policy, n, w, args)
                results.append(row)
                print(
                    json.dumps({k: row.get(k) for k in FIELDS if k in row}),
                    file=sys.stderr,
                    flush=True,
                )
                if args.out is not None:
                    with args.out.open("a", newline="") as fh:
                        writer = csv.DictWriter(fh, FIELDS, extrasaction="ignore")
                        if new_file:
                            writer.writeheader()
                            new_file = False
                        writer.writerow(row)
    print(markdown(results))


if __name__ == "__main__":
    main()
