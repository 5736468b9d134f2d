"""The gateway's overhead, and (``--fidelity``) live serving against the simulator.

    python benchmarks/bench_serve.py --rate 200 --seconds 10
    python benchmarks/bench_serve.py --fidelity --workflows 20 --load 0.5 --time-scale 0.1

Overhead: a fleet of instant engines (``scalesched fleet --time-scale 0``: every request
answered at once, so what is measured is HTTP and the gateway) and a gateway with
``--policy`` over it run as two subprocesses; this process sends non-streaming chat
requests open-loop at ``--rate`` per second, alternating between one engine directly and
the gateway, side by side in one run, and prints p50/p99 latency of each and the
difference (the gateway's added latency: its parsing, decision, bookkeeping and the extra
hop).

Fidelity: ``scalesched loadgen`` against the gateway over an emulated fleet of the same
cluster, next to ``scalesched simulate`` on the same jobs (same workload, load, seed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np

from scalesched.serve.loop import loop_name
from scalesched.serve.loop import run as run_loop

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}
CLI = [sys.executable, "-m", "scalesched"]


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        CLI + args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _wait_http(url: str, deadline_s: float = 60.0) -> None:
    import urllib.request

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not come up")


def _stack(
    cluster: str,
    policy: str,
    time_scale: float,
    port: int,
    work: Path,
    deployment: Path | None = None,
):
    """Start a fleet and a gateway (both running ``deployment``'s replicas when given);
    returns (processes, gateway URL, first engine URL)."""
    backends = work / "backends.yaml"
    backends.unlink(missing_ok=True)
    pinned = ["--deployment", str(deployment)] if deployment is not None else []
    fleet_args = ["fleet", "--cluster", cluster, "--port", str(port + 1)]
    fleet = _start(
        fleet_args + ["--time-scale", str(time_scale), "--backends-out", str(backends), *pinned]
    )
    end = time.monotonic() + 60
    while not backends.exists() and time.monotonic() < end:
        time.sleep(0.2)
    gateway = _start(
        [
            "serve",
            "--backends",
            str(backends),
            "--policy",
            policy,
            "--port",
            str(port),
            "--time-scale",
            str(time_scale or 1.0),
            "--cluster",
            cluster,
            *pinned,
        ]
    )
    _wait_http(f"http://127.0.0.1:{port}/health")
    return [fleet, gateway], f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port + 1}/v1"


async def _open_loop(urls: list[str], rate: float, seconds: float) -> list[list[float]]:
    """Send requests at ``rate``/s for ``seconds``, request k to urls[k % len(urls)];
    latencies per URL."""
    body = {
        "model": "llama-2-7b",
        "messages": [{"role": "user", "content": "hello " * 50}],
        "max_tokens": 16,
    }
    out: list[list[float]] = [[] for _ in urls]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        for url in urls:  # warm the connections and the gateway
            for _ in range(20):
                async with s.post(url + "/chat/completions", json=body) as r:
                    await r.read()

        async def one(k: int) -> None:
            t0 = time.perf_counter()
            async with s.post(urls[k % len(urls)] + "/chat/completions", json=body) as r:
                await r.read()
                assert r.status == 200, r.status
            out[k % len(urls)].append(time.perf_counter() - t0)

        start, tasks = time.perf_counter(), []
        for k in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + k / rate - time.perf_counter()))
            tasks.append(asyncio.ensure_future(one(k)))
        await asyncio.gather(*tasks)
    return out


def overhead(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        procs, gateway, engine = _stack(args.cluster, args.policy, 0.0, args.port, Path(tmp))
        try:
            direct, via = run_loop(_open_loop([engine, gateway], args.rate, args.seconds))
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=10)
    d, g = np.asarray(direct) * 1e3, np.asarray(via) * 1e3
    return {
        "rate_per_s": args.rate,
        "requests_each": int(d.size),
        "policy": args.policy,
        "loop": loop_name(),
        "direct_p50_ms": float(np.percentile(d, 50)),
        "direct_p99_ms": float(np.percentile(d, 99)),
        "gateway_p50_ms": float(np.percentile(g, 50)),
        "gateway_p99_ms": float(np.percentile(g, 99)),
        "added_p50_ms": float(np.percentile(g, 50) - np.percentile(d, 50)),
        "added_p99_ms": float(np.percentile(g, 99) - np.percentile(d, 99)),
    }


KEYS = ("workflows_completed", "avg_response_time_s", "p50_response_time_s", "p99_response_time_s")


def _plan(args: argparse.Namespace, work: Path) -> Path:
    """A deployment for the run's arrival rate (``scalesched plan``), which both the fleet
    and the simulator then run: the same resident engines on both sides."""
    from scalesched.cluster import get_cluster
    from scalesched.runs.capacity import capacity_wps

    rate = args.load * capacity_wps(get_cluster(args.cluster), args.workload)
    out = work / "plan.yaml"
    plan = ["plan", "--cluster", args.cluster, "--workload", args.workload]
    subprocess.run(
        CLI + plan + ["--rate", f"{rate:.6g}", "--out", str(out)],
        env=ENV,
        check=True,
        capture_output=True,
    )
    return out


def _live(args: argparse.Namespace, policy: str, seed: int, common: list[str], work: Path):
    deployment = getattr(args, "deployment_path", None)
    procs, gateway, _ = _stack(args.cluster, policy, args.time_scale, args.port, work, deployment)
    try:
        t0 = time.perf_counter()
        out = subprocess.run(
            CLI
            + ["loadgen", "--url", gateway, "--cluster", args.cluster]
            + ["--time-scale", str(args.time_scale), "--json", *common],
            env=ENV,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        wall = time.perf_counter() - t0
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    m = json.loads(out)
    return {k: m[k] for k in KEYS} | {"requests_failed": m["requests_failed"], "wall_s": wall}


def _simulated(args: argparse.Namespace, policy: str, common: list[str]) -> dict[str, object]:
    deployment = getattr(args, "deployment_path", None)
    pinned = ["--deployment", str(deployment)] if deployment is not None else []
    sim = ["simulate", "--cluster", args.cluster, "--policy", policy]
    out = subprocess.run(
        CLI
        + sim
        + ["--warmup", "0", "--cooldown", "0", "--json", "--no-progress"]
        + common
        + pinned,
        env=ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    m = json.loads(out.strip().splitlines()[-1])
    return {k: m[k] for k in KEYS} | {"model_loads": m["model_loads"]}


def fidelity(args: argparse.Namespace) -> dict[str, object]:
    """Every (policy, seed): live and simulated on the same jobs and the same engines."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.residency == "deployment":
            args.deployment_path = args.deployment or _plan(args, work)
        for seed in args.seeds:
            common = ["--workload", args.workload, "--load", str(args.load)]
            common += ["--workflows", str(args.workflows), "--seed", str(seed)]
            for policy in args.policies:
                live = _live(args, policy, seed, common, work)
                sim = _simulated(args, policy, common)
                ratio = live["avg_response_time_s"] / sim["avg_response_time_s"]
                rows.append(
                    {"policy": policy, "seed": seed, "live": live, "simulate": sim}
                    | {"live_over_sim_mean": ratio}
                )
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {"residency": args.residency, "load": args.load, "runs": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="hetero-16")
    parser.add_argument("--policy", default="eft", help="the overhead run's policy")
    parser.add_argument(
        "--policies", type=lambda v: v.split(","), default=["eft"], help="fidelity: a,b,..."
    )
    parser.add_argument(
        "--seeds", type=lambda v: [int(x) for x in v.split(",")], default=[0], help="fidelity"
    )
    parser.add_argument(
        "--residency",
        choices=("deployment", "dynamic"),
        default="deployment",
        help="fidelity: fleet and simulator run one deployment (--deployment, or `plan` at "
        "the run's rate), or the fleet every model resident and the simulator dynamic loads",
    )
    parser.add_argument("--deployment", type=Path, default=None)
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--fidelity", action="store_true")
    parser.add_argument("--workload", default="agentic-mix")
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--workflows", type=int, default=20)
    parser.add_argument("--time-scale", type=float, default=0.1)
    args = parser.parse_args()
    print(json.dumps(fidelity(args) if args.fidelity else overhead(args), indent=1))


if __name__ == "__main__":
    main()
