"""The headroom map (docs/headroom-map.md): in each cell (workload x cluster x load x arrival
process) the best heuristic's gap to the capacity-aware bound, a learned policy's ratio to
the best heuristic and, where asked, the oracles' gain over it, each from one
`scalesched headroom --json` run per seed.

    python research/headroom_map.py --out results/headroom-map.jsonl [--seeds 5,6,7] [--jobs 2]
    python research/headroom_map.py --out results/headroom-map.jsonl --summarise
    python research/headroom_map.py --out results/oracle.jsonl --oracles rollout_oracle,rollout \
        --seeds 5,6,7 --cells agentic-mix:hetero-16:0.9,coordinator:skewed:0.7:azure-code
    python research/headroom_map.py --out results/oracle-plan.jsonl --plan oracle --seeds 5,6,7 \
        --jobs 16 [--todo]
    python research/headroom_map.py --out results/oracle-plan.jsonl --plan oracle --seeds 5,6,7 \
        --ray-address HEAD:6379

Every run is in the world ``--residency`` names (``planned``, the default: a deployment
planned for the offered rate; or ``dynamic``) and as long as ``--workflows`` says (``auto``,
the default: grown until the best heuristic's mean is within 2%, at most
``--max-workflows``); lines written before the world was recorded are dynamic residency.
Cells already in the output file are skipped, so an interrupted map resumes; a cell that
failed is run again. ``--cells`` runs the named cells in the order given
(``WORKLOAD:CLUSTER:LOAD[:ARRIVALS[:CACHES]]``, arrivals ``poisson`` and caches ``none`` by
default); without it, every cell of ``WORKLOADS`` x the clusters x ``LOADS``. The oracles
(``--oracles``: ``rollout_oracle``, the clairvoyant rollout over each run's best heuristic;
``rollout``, the same on sampled futures) cost about 0.2 s of CPU per workflow each on the
compiled core, so they are run on chosen cells only; where the best heuristic has no
compiled twin (``shortest_remaining``, say), the oracle's trials are Python forks, some 50
times dearer.
``--plan oracle`` is the oracle map to fill (``ORACLE_PLAN``: 40 cells, each with the
oracle and, with models loaded on demand, the run length it needs; on deployments
``--workflows``); ``--todo`` lists what is left of a plan or a ``--cells`` list in the
output file and stops. ``--ray-address ADDR`` (or
``--ray-local``) runs each job as a one-CPU Ray task on that cluster instead of ``--jobs``
local processes, as ``scalesched eval`` does (every worker needs scalesched installed).
``--summarise`` prints, per cell over its seeds, the best heuristic's gap to the bound with
a 95% CI (``(cf)``: against the contention-free bound, where the capacity-aware one was not
solved in its time limit or is infeasible), the learned policy's seed-paired ratio to the
best heuristic, and each oracle's seed-paired ratio to the best heuristic and to its own
base.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

from scalesched.policies import BEST_HEURISTIC_CANDIDATES, best_heuristic
from scalesched.policies.options import split_policy_list
from scalesched.stats import mean_ci_text, paired_ratio_ci

WORKLOADS = ("agentic-mix", "tool-heavy", "coordinator", "best-of-n", "self-consistency")
LOADS = (0.5, 0.7, 0.9)
SKEWED = """name: skewed-a100
servers:
  - type: h100-80g-x4
    count: 1
  - type: a100-80g-x4
    count: 5
  - type: cpu-64c
    count: 2
"""
LEARNED = "scale-dagger"


class Cell(NamedTuple):
    workload: str
    cluster: str
    load: float
    arrivals: str = "poisson"
    caches: str = "none"
    """``none``, ``kv`` (``--kv-policy lru``) or ``kv+tools`` (also ``--tool-repeat 0.3
    --tool-cache on``: a third of tool calls repeat an earlier one and may reuse it)."""
    residency: str = "planned"
    """The run's world (``--residency``): ``planned`` (a deployment planned for the
    offered rate, the default) or ``dynamic`` (models loaded on demand)."""


CACHE_ARGS = {
    "none": [],
    "kv": ["--kv-policy", "lru"],
    "kv+tools": ["--kv-policy", "lru", "--tool-repeat", "0.3", "--tool-cache", "on"],
}


CLUSTERS = ("hetero-16", "homogeneous-16", "skewed")

ORACLE = "rollout_oracle:horizon_s=60"
"""The plan's oracle: a 60 s view, because 20 s is worse than its base on the skewed mix
(docs/headroom-map.md) and an oracle must outlast what the placements it weighs cost."""
ORACLE_ALL_CALLS = ORACLE + ",min_model_gb=0"
"""On test-time scaling every call is llama-2-7b, which the default oracle never contests."""
ORACLE_PLAN: tuple[tuple[str, str, int], ...] = (
    # (cells, oracle, workflows per run): 40 cells
    (
        "agentic-mix:hetero-16:0.5,agentic-mix:hetero-16:0.7,agentic-mix:hetero-16:0.9,"
        "agentic-mix:hetero-16:1.0,agentic-mix:homogeneous-16:0.5,agentic-mix:homogeneous-16:0.7,"
        "agentic-mix:homogeneous-16:0.9,agentic-mix:homogeneous-16:1.0,agentic-mix:skewed:0.5,"
        "agentic-mix:skewed:0.7,agentic-mix:skewed:0.9,agentic-mix:skewed:1.0,"
        "tool-heavy:hetero-16:0.7,tool-heavy:hetero-16:0.9,tool-heavy:skewed:0.7,"
        "tool-heavy:skewed:0.9,tool-heavy:homogeneous-16:0.9,coordinator:hetero-16:0.7,"
        "coordinator:hetero-16:0.9,coordinator:skewed:0.7,coordinator:skewed:0.9,"
        "coordinator:homogeneous-16:0.9,agentic-mix:hetero-16:0.7:azure-conv,"
        "agentic-mix:hetero-16:0.9:azure-conv,agentic-mix:skewed:0.9:azure-conv,"
        "agentic-mix:hetero-16:0.9:poisson:kv,agentic-mix:skewed:0.9:poisson:kv,"
        "tool-heavy:hetero-16:0.9:poisson:kv+tools,coordinator:hetero-16:0.9:poisson:kv+tools,"
        "coordinator:skewed:0.7:poisson:kv+tools",
        ORACLE,
        1500,
    ),
    (
        "best-of-n:hetero-16:0.5,best-of-n:hetero-16:0.9,best-of-n:homogeneous-16:0.5,"
        "best-of-n:homogeneous-16:0.9,self-consistency:hetero-16:0.5,"
        "self-consistency:hetero-16:0.9,self-consistency:homogeneous-16:0.5,"
        "self-consistency:homogeneous-16:0.9",
        ORACLE_ALL_CALLS,
        1500,
    ),
    # Bursts need long runs to settle (docs/headroom-map.md: 15,000 workflows).
    ("agentic-mix:hetero-16:0.7:bursty,agentic-mix:hetero-16:0.9:bursty", ORACLE, 15000),
)
"""The oracle map to fill: workloads x mixes x loads x arrivals x caches, 40 cells."""


def clusters(folder: Path) -> dict[str, str]:
    """Name -> what ``--cluster`` takes: two presets and the skewed mix, written out."""
    skewed = folder / "skewed.yaml"
    skewed.write_text(SKEWED)
    return {"hetero-16": "hetero-16", "homogeneous-16": "homogeneous-16", "skewed": str(skewed)}


def cell_of(row: dict) -> Cell:
    """The cell a result line belongs to (lines written before arrivals were a setting
    are Poisson; before the world was, dynamic residency, then the only world)."""
    return Cell(
        row["workload"],
        row["cluster"],
        row["load"],
        row.get("arrivals", "poisson"),
        row.get("caches", "none"),
        row.get("residency", "dynamic"),
    )


def parse_cells(text: str, residency: str = "planned") -> list[Cell]:
    """``WORKLOAD:CLUSTER:LOAD[:ARRIVALS[:CACHES]],...``; the workload may hold colons of
    its own (``wfcommons:montage:100``): it runs up to the first known cluster name."""
    cells = []
    for item in text.split(","):
        parts = item.strip().split(":")
        at = next((i for i, p in enumerate(parts) if i and p in CLUSTERS), len(parts))
        workload, rest = ":".join(parts[:at]), parts[at:]
        if len(rest) not in (2, 3, 4) or (len(rest) == 4 and rest[3] not in CACHE_ARGS):
            raise SystemExit(
                f"--cells: {item!r} is not WORKLOAD:CLUSTER:LOAD[:ARRIVALS[:CACHES]] "
                f"(clusters: {', '.join(CLUSTERS)}; caches: {', '.join(CACHE_ARGS)})"
            )
        cells.append(Cell(workload, rest[0], float(rest[1]), *rest[2:], residency=residency))
    return cells


class Job(NamedTuple):
    """One run of the map: a cell at a seed, with its oracle rows and length."""

    cell: Cell
    seed: int
    oracles: tuple[str, ...]
    workflows: str
    """Workflows per run, or ``auto`` (grown to the precision ``headroom`` asks for)."""


def job_of(row: dict) -> Job:
    """The job a result line came from (lines written before the oracles and the length
    were recorded: read off the result)."""
    result = row.get("result", {})
    oracles = row.get("oracles", sorted(result.get("oracle", {})))
    workflows = row.get("workflows", result.get("setting", {}).get("workflows", 0))
    return Job(cell_of(row), row["seed"], tuple(oracles), str(workflows))


def run_cell(job: Job, where: str, extra: tuple[str, ...], max_workflows: int) -> dict:
    cell = job.cell
    cmd = [sys.executable, "-m", "scalesched", "headroom", "--cluster", where]
    cmd += ["--workload", cell.workload, "--load", str(cell.load), "--arrivals", cell.arrivals]
    cmd += ["--residency", cell.residency, "--max-workflows", str(max_workflows)]
    cmd += ["--workflows", str(job.workflows), "--seed", str(job.seed), "--json"]
    cmd += ["--no-progress", "--no-split", *CACHE_ARGS[cell.caches]]  # the map's own runs only
    oracles = job.oracles
    cmd += [a for o in oracles for a in ("--oracle", o)] if oracles else ["--no-oracle"]
    for policy in (*BEST_HEURISTIC_CANDIDATES, LEARNED, *extra):
        cmd += ["--policy", policy]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    row = {**cell._asdict(), "seed": job.seed, "oracles": oracles, "workflows": job.workflows}
    if done.returncode != 0:
        return {**row, "error": done.stderr.strip().splitlines()[-1:]}
    return {**row, "result": json.loads(done.stdout)}


def read_cells(path: Path) -> dict[Cell, dict[int, dict]]:
    """Cell -> seed -> the headroom result (the last line for a seed wins; failures skipped)."""
    cells: dict[Cell, dict[int, dict]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "error" not in row:
            cells.setdefault(cell_of(row), {})[row["seed"]] = row["result"]
    return cells


def _ratio(numerator: dict[int, float], denominator: dict[int, float]) -> str:
    if len(numerator) < 2:
        (seed,) = numerator
        return f"{numerator[seed] / denominator[seed]:.3f}"
    m, h = paired_ratio_ci(numerator, denominator)
    return f"{m:.3f} ± {h:.3f}"


def cell_best(by_seed: dict[int, dict]) -> str:
    """The cell's best heuristic: one choice over its seeds (the lowest mean)."""
    means: dict[str, list[float]] = {}
    for r in by_seed.values():
        for name, row in r["policies"].items():
            if not row["oracle"] and name in BEST_HEURISTIC_CANDIDATES:
                means.setdefault(name, []).append(row["mean_s"])
    best = best_heuristic(means)
    assert best is not None
    return best


ORDERING = ("plas", "shortest_remaining", "fcfs_workflow")
"""Ordering baselines the map may run beside the candidates (``--extra-policies``)."""


def summarise(path: Path) -> None:
    print(
        "| world | workload | cluster | load | arrivals | caches | seeds | best heuristic | "
        f"its gap to the bound | best ordering / best | {LEARNED} / best | all steady |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, by_seed in read_cells(path).items():
        best = cell_best(by_seed)
        # like for like: every seed against the capacity-aware bound, or every one against
        # the contention-free bound where some seed's capacity-aware program went unsolved
        solved = all(r["capacity_bound"]["mean_s"] is not None for r in by_seed.values())
        gap = [
            r["policies"][best]["gap"]
            if solved
            else 1 - r["lower_bound"]["mean_s"] / r["policies"][best]["mean_s"]
            for r in by_seed.values()
        ]
        mark = " **>= 10%**" if sum(gap) / len(gap) >= 0.10 else ""
        learned = {s: r["policies"][LEARNED]["mean_s"] for s, r in by_seed.items()}
        of_best = {s: r["policies"][best]["mean_s"] for s, r in by_seed.items()}
        steady = all(
            r["policies"][name]["steady"] for r in by_seed.values() for name in (best, LEARNED)
        )
        gap_text = (
            f"{gap[0]:.1%}"
            if len(gap) == 1
            else mean_ci_text([100 * g for g in gap], digits=1) + "%"
        )
        if not solved:
            gap_text += " (cf)"
        print(
            f"| {cell.residency} | {cell.workload} | {cell.cluster} | {cell.load} | "
            f"{cell.arrivals} | {cell.caches} | {len(by_seed)} | {best} | {gap_text}{mark} | "
            f"{_ordering(by_seed, of_best)} | {_ratio(learned, of_best)} | "
            f"{'yes' if steady else 'no'} |"
        )


def _ordering(by_seed: dict[int, dict], of_best: dict[int, float]) -> str:
    """The ordering baseline with the lowest mean over the seeds, as a seed-paired ratio to
    the best heuristic ("-" where the cell did not run them)."""
    means = {
        name: {s: r["policies"][name]["mean_s"] for s, r in by_seed.items()}
        for name in ORDERING
        if all(name in r["policies"] for r in by_seed.values())
    }
    if not means:
        return "-"
    name = min(means, key=lambda n: sum(means[n].values()))
    return f"{name} {_ratio(means[name], of_best)}"


def summarise_oracles(path: Path) -> None:
    """Per cell and oracle: its seed-paired ratio to the cell's best heuristic and to the
    heuristic it rolled out over (each seed's best), with 95% CIs over the seeds."""
    rows = []
    for cell, by_seed in read_cells(path).items():
        names = sorted({o for r in by_seed.values() for o in r["oracle"]})
        if not names:
            continue
        best = cell_best(by_seed)
        of_best = {s: r["policies"][best]["mean_s"] for s, r in by_seed.items()}
        for name in names:
            runs = {s: r for s, r in by_seed.items() if name in r["oracle"]}
            mean = {s: r["oracle"][name]["mean_s"] for s, r in runs.items()}
            base = {s: r["policies"][r["oracle"][name]["base"]]["mean_s"] for s, r in runs.items()}
            steady = all(r["policies"][name]["steady"] for r in runs.values())
            rows.append(
                f"| {cell.residency} | {cell.workload} | {cell.cluster} | {cell.load} | "
                f"{cell.arrivals} | {cell.caches} | {name} | "
                f"{len(runs)} | {best} | {_ratio(mean, {s: of_best[s] for s in runs})} | "
                f"{_ratio(mean, base)} | {'yes' if steady else 'no'} |"
            )
    if rows:
        print()
        print(
            "| world | workload | cluster | load | arrivals | caches | oracle | seeds | "
            "best heuristic | oracle / best | oracle / its base | steady |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))


def planned(args: argparse.Namespace, seeds: list[int]) -> list[Job]:
    """Every job the command names: the plan's, or ``--cells`` (else every cell of
    ``WORKLOADS`` x the clusters x ``LOADS``) with ``--oracles`` and ``--workflows``."""
    if args.plan == "oracle":
        # The plan's lengths were set for dynamic residency; a deployment carries several
        # times the traffic, so there its runs take --workflows (auto by default).
        dynamic = args.residency == "dynamic"
        groups = [
            (parse_cells(c, args.residency), (o,), str(n) if dynamic else args.workflows)
            for c, o, n in ORACLE_PLAN
        ]
    else:
        cells = (
            parse_cells(args.cells, args.residency)
            if args.cells
            else [
                Cell(w, c, x, residency=args.residency)
                for w, c, x in itertools.product(WORKLOADS, CLUSTERS, LOADS)
            ]
        )
        groups = [(cells, split_policy_list(args.oracles), args.workflows)]
    return [Job(c, s, o, n) for cells, o, n in groups for c in cells for s in seeds]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workflows", default="auto", help="per run, or auto (default)")
    ap.add_argument("--max-workflows", type=int, default=8000, help="the longest auto run")
    ap.add_argument("--residency", choices=("planned", "dynamic"), default="planned")
    ap.add_argument("--seeds", default="5", help="comma-separated seeds (default 5)")
    ap.add_argument("--cells", default=None, help="WORKLOAD:CLUSTER:LOAD[:ARRIVALS[:CACHES]],...")
    ap.add_argument("--oracles", default="", help="oracle rows, e.g. rollout_oracle,rollout")
    ap.add_argument("--plan", choices=["oracle"], help="run a named plan (ORACLE_PLAN)")
    ap.add_argument("--todo", action="store_true", help="list the jobs left, run nothing")
    ap.add_argument("--extra-policies", default="", help="more policies, e.g. plas")
    ap.add_argument("--jobs", type=int, default=1, help="local runs at a time")
    ap.add_argument(
        "--ray-address", default=None, help="run each job as a task on this Ray cluster"
    )
    ap.add_argument("--ray-local", action="store_true", help="...or on a local Ray")
    ap.add_argument("--summarise", action="store_true")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.out)
        summarise_oracles(args.out)
        return
    seeds = [int(x) for x in args.seeds.split(",")]
    done = set()
    if args.out.exists():
        rows = [json.loads(line) for line in args.out.read_text().splitlines()]
        done = {job_of(row) for row in rows if "error" not in row}
    todo = [job for job in planned(args, seeds) if job not in done]
    if args.todo:
        for job in todo:
            print(*job.cell, job.seed, ",".join(job.oracles) or "-", job.workflows)
        print(f"{len(todo)} jobs left")
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    run_jobs(todo, args)


def run_jobs(todo: list[Job], args: argparse.Namespace) -> None:
    """Run the jobs ``--jobs`` at a time, or as Ray tasks (``--ray-address``,
    ``--ray-local``), each line appended as soon as its run ends (so an interrupted plan
    loses only the runs in flight)."""
    extra = split_policy_list(args.extra_policies)
    with args.out.open("a") as out:
        if args.ray_address or args.ray_local:
            rows = rows_from_ray(todo, extra, args.max_workflows, args.ray_address)
        else:
            rows = rows_from_pool(todo, extra, args.max_workflows, args.jobs, args.out.parent)
        for row in rows:
            out.write(json.dumps(row) + "\n")
            out.flush()
            status = f"error: {row['error']}" if "error" in row else "ok"
            print(*cell_of(row), row["seed"], status, flush=True)


def rows_from_pool(
    todo: list[Job], extra: tuple[str, ...], max_workflows: int, jobs: int, folder: Path
) -> Iterator[dict]:
    """The jobs' result lines as they finish, ``jobs`` local processes at a time."""
    where = clusters(folder)
    with ThreadPoolExecutor(jobs) as pool:
        running = [
            pool.submit(
                run_cell, job, where.get(job.cell.cluster, job.cell.cluster), extra, max_workflows
            )
            for job in todo
        ]
        for finished in as_completed(running):
            yield finished.result()


def run_cell_anywhere(job: Job, extra: tuple[str, ...], max_workflows: int) -> dict:
    """``run_cell`` on a machine of its own (a Ray worker): the skewed mix written there."""
    with tempfile.TemporaryDirectory(prefix="headroom-map-") as folder:
        where = clusters(Path(folder))
        return run_cell(job, where.get(job.cell.cluster, job.cell.cluster), extra, max_workflows)


def rows_from_ray(
    todo: list[Job], extra: tuple[str, ...], max_workflows: int, address: str | None
) -> Iterator[dict]:
    """The jobs' result lines as they finish, each job a Ray task of one CPU on the cluster
    at ``address`` (None: a local Ray); each worker needs scalesched installed."""
    import ray

    from scalesched.runtime.scaleout import ray_connection

    with ray_connection(address):
        remote = ray.remote(num_cpus=1, max_retries=1)(run_cell_anywhere)
        pending = [remote.remote(job, extra, max_workflows) for job in todo]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                yield ray.get(ref)


if __name__ == "__main__":
    main()
