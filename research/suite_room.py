"""The room left in each setting of a robustness suite, and a learned policy's ratio where
there is room (docs/robustness.md, "Where room is left").

    python research/suite_room.py --out results/suite-room.jsonl [--seed 90] [--jobs 2] [--oracle]
    python research/suite_room.py --out results/suite-room.jsonl --summarise \
        results/robust/robustness.json [more robustness.json ...] [--policy scale-safe]

The room of a setting is its best heuristic's gap to the capacity-aware bound, (mean -
bound) / mean, from one ``scalesched headroom --no-oracle --no-split --json`` run on an
evaluation seed (the share any scheduler, placing or ordering, could still win; ``(cf)``:
against the contention-free bound, where the capacity-aware program went unsolved in its
time limit). Settings already in the output file are skipped, so an interrupted sweep
resumes. ``--summarise`` joins the rooms with suite results (a later file's setting
replaces an earlier one's: a longer run of a few settings over the whole suite's) and
prints, per setting, the room beside the policy's mean ratio to the best heuristic, then
the suite's summary (``scalesched.eval.robustness.suite_summary``: the rows that count,
every run behind them steady) over all rows and over the rows with at least ``--room``
of room, the target's two averages. With ``--oracle`` the sweep runs the clairvoyant
rollout oracle too, and the summary gives its mean over the best heuristic of its run: how
much of the room clairvoyance takes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scalesched.eval.robustness import cluster_reference, counted, suite_summary
from scalesched.eval.suite import Suite, SuiteSetting, load_suite

ROOM = 0.10
"""The issue's threshold: settings where at least this share of the mean is left."""


def headroom(
    suite: Suite, setting: SuiteSetting, folder: Path, seed: int, workflows: int, oracle: bool
) -> dict:
    """One setting's ``headroom`` run, as a result line (``error`` where it failed); with
    ``oracle``, the clairvoyant rollout oracle's row too (slow)."""
    cmd = [sys.executable, "-m", "scalesched", "headroom"]
    cmd += ["--cluster", cluster_reference(suite, setting, folder)]
    cmd += ["--workload", setting.workload, "--load", str(setting.load)]
    cmd += ["--arrivals", setting.arrivals, "--residency", setting.world]
    cmd += ["--workflows", str(setting.workflows or workflows), "--seed", str(seed)]
    cmd += [] if oracle else ["--no-oracle"]
    cmd += ["--no-split", "--no-progress", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    row = {"setting": setting.name, "seed": seed}
    if done.returncode != 0:
        return {**row, "error": done.stderr.strip().splitlines()[-1:]}
    return {**row, "result": json.loads(done.stdout)}


def room_of(result: dict, best_heuristic: str) -> tuple[float, bool]:
    """(``best_heuristic``'s gap in a headroom result, whether it is against the
    capacity-aware bound)."""
    best = result["policies"][best_heuristic]
    solved = result["capacity_bound"]["mean_s"] is not None
    return (best["gap"] if solved else best["gap_contention_free"]), solved


def read_rooms(path: Path) -> dict[str, dict]:
    """Setting -> its headroom result (failed lines skipped; the last line wins)."""
    rooms: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "error" not in row:
            rooms[row["setting"]] = row["result"]
    return rooms


def oracle_ratio(result: dict) -> str:
    """The oracle's mean over the best heuristic of the same headroom run ('-': not run)."""
    oracles = result.get("oracle") or {}
    gains = [o["gain_over_best"] for o in oracles.values() if o.get("gain_over_best") is not None]
    return "-" if not gains else " ".join(f"{1 - g:.3f}" for g in gains)


def sweep(args: argparse.Namespace) -> None:
    suite = load_suite(args.suite)
    done = set(read_rooms(args.out)) if args.out.exists() else set()
    todo = [s for s in suite.pick(args.settings) if s.name not in done]
    print(f"{len(todo)} settings to run", flush=True)
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(args.jobs) as pool:
        lines = pool.map(
            lambda s: headroom(suite, s, Path(folder), args.seed, args.workflows, args.oracle),
            todo,
        )
        for line in lines:
            with args.out.open("a") as f:
                f.write(json.dumps(line) + "\n")
            print(line["setting"], "failed" if "error" in line else "ok", flush=True)


def summarise(args: argparse.Namespace) -> None:
    rooms = read_rooms(args.out)
    results: dict[str, dict] = {}
    for path in args.summarise:
        for r in json.loads(Path(path).read_text())["settings"]:
            results[r["name"]] = r
    p = args.policy
    print(f"| setting | best heuristic | room | {p} mean / best | counted | oracle / best |")
    print("|---|---|---|---|---|---|")
    roomy = []
    for name, r in results.items():
        if name not in rooms or p not in r["policies"]:
            continue
        gap, solved = room_of(rooms[name], r["best_heuristic"])  # the suite's yardstick
        e = r["policies"][p]
        mark = "" if solved else " (cf)"
        ratio = f"{e['mean_ratio']:.3f} ± {e['mean_ratio_ci']:.3f}"
        print(
            f"| `{name}` | {r['best_heuristic']} | {gap:.1%}{mark} | {ratio} | "
            f"{'yes' if counted(r, p, False) else 'no'} | {oracle_ratio(rooms[name])} |"
        )
        if gap >= args.room:
            roomy.append(r)
    for label, rows in (("all rows", list(results.values())), (f"room >= {args.room:.0%}", roomy)):
        s = suite_summary(rows, [p])[p]
        print(
            f"{label}: {s.get('mean_ratio', float('nan')):.3f} over {s['settings']} counted rows"
            f" (left out: {', '.join(s['left_out']) or 'none'})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one per setting")
    ap.add_argument("--suite", default="robustness", help="a suite name or file")
    ap.add_argument("--settings", help="comma-separated evaluation settings (default: all)")
    ap.add_argument("--seed", type=int, default=90, help="an evaluation seed of the suite")
    ap.add_argument("--workflows", type=int, default=2000, help="workflows per run")
    ap.add_argument("--jobs", type=int, default=1, help="settings run at once")
    ap.add_argument("--oracle", action="store_true", help="run the rollout oracle too (slow)")
    ap.add_argument("--summarise", nargs="+", metavar="RESULT", help="robustness.json files")
    ap.add_argument("--policy", default="scale-safe", help="the learned policy summarised")
    ap.add_argument("--room", type=float, default=ROOM, help="the room threshold (a share)")
    args = ap.parse_args()
    if args.summarise:
        summarise(args)
    else:
        sweep(args)


if __name__ == "__main__":
    main()
