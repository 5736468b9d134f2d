"""The gateway's overhead, and (``--fidelity``) live serving against the simulator.

    python benchmarks/bench_serve.py --rates 200,400,800 --seconds 5 --port 18300
    python benchmarks/bench_serve.py --fidelity --workflows 100 --load 0.7 --time-scale 0.5 \
        --policies eft,tail,round_robin,kv_aware --seeds 0

Overhead: a fleet of instant engines (``scalesched fleet --instant``: every request
answered at once, so what is measured is HTTP and the router), a gateway with ``--policy``
over it and, when installed (``pip install sglang-router``), sglang-router (round robin)
over the same engines, each its own process. This process sends non-streaming chat
requests open-loop at each rate of ``--rates`` per second to each of: the first engine
directly, the gateway, sglang-router, interleaved in one loop; it prints p50/p99 of each,
the gateway's added latency (its parsing, decision, bookkeeping and the extra hop), and the
highest rate each keeps p99 under 50 ms at. ``--baseline-src DIR`` adds a second gateway run
from another source tree (e.g. ``git archive <commit> src | tar -x -C DIR``) over the same
engines, in the same loop: a before/after comparison that the machine's noise hits alike.
Each gateway's CPU time per request (its process's user + system time over the requests
it answered) is printed too: less noisy than latency on a shared machine.

Fidelity: ``scalesched loadgen`` against the gateway over an emulated fleet of the same
cluster, next to ``scalesched simulate`` on the same jobs (same workload, load, seed), both
running one deployment (by default ``scalesched plan``'s at the run's arrival rate): the
same resident engines live and simulated. Each (policy, seed) prints a line as it ends.
Ports: ``--port`` .. ``--port`` + 20 (and + 40 for sglang-router) must be free.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np
import yaml

from scalesched.serve.loop import loop_name
from scalesched.serve.loop import run as run_loop

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}
CLI = [sys.executable, "-m", "scalesched"]


def _start(args: list[str], log: Path, src: str = SRC) -> subprocess.Popen[bytes]:
    env = {**ENV, "PYTHONPATH": src}
    with open(log, "ab") as err:
        return subprocess.Popen(CLI + args, env=env, stdout=subprocess.DEVNULL, stderr=err)


def _cpu_s(proc: subprocess.Popen[bytes]) -> float:
    """User + system CPU seconds of a process (Linux /proc; its children excluded)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _check_ports_free(first: int, count: int) -> None:
    """Refuse to start on ports something else listens on (it would be measured instead)."""
    for port in range(first, first + count):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                raise SystemExit(f"port {port} is in use: pick another --port")


def _wait_http(url: str, procs: list[subprocess.Popen[bytes]], deadline_s: float = 90.0) -> None:
    import urllib.request

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if any(p.poll() is not None for p in procs):
            raise SystemExit(f"a process serving {url} exited (see its log)")
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
    """Start a fleet and a gateway (both running ``deployment``'s replicas when given;
    ``time_scale`` 0: instant engines); returns (processes, gateway URL, engine URLs)."""
    _check_ports_free(port, 20)
    backends = work / "backends.yaml"
    backends.unlink(missing_ok=True)
    pinned = ["--deployment", str(deployment)] if deployment is not None else []
    scale = ["--instant"] if time_scale == 0 else ["--time-scale", str(time_scale)]
    fleet = _start(
        ["fleet", "--cluster", cluster, "--port", str(port + 1), *scale]
        + ["--backends-out", str(backends), *pinned],
        work / "fleet.log",
    )
    end = time.monotonic() + 90
    while not backends.exists() and time.monotonic() < end and fleet.poll() is None:
        time.sleep(0.2)
    if not backends.exists():
        fleet.terminate()
        raise SystemExit("the fleet did not start: " + (work / "fleet.log").read_text()[-500:])
    gateway = _start(
        ["serve", "--backends", str(backends), "--policy", policy, "--port", str(port)]
        + ["--time-scale", str(time_scale or 1.0), "--cluster", cluster, *pinned],
        work / "serve.log",
    )
    procs = [fleet, gateway]
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", procs)
    except SystemExit:
        _stop(procs)
        raise
    urls = [b["endpoint"]["base_url"] for b in yaml.safe_load(backends.read_text())["backends"]]
    return procs, f"http://127.0.0.1:{port}/v1", urls


def _baseline_gateway(src: Path, policy: str, port: int, work: Path) -> subprocess.Popen[bytes]:
    """A second gateway over the same engines (``work``'s backends file), run from another
    source tree: the 'before' of a before/after comparison."""
    if not (src / "scalesched" / "serve" / "gateway.py").exists():
        raise SystemExit(f"--baseline-src {src}: no scalesched/serve/gateway.py under it")
    _check_ports_free(port, 1)
    args = ["serve", "--backends", str(work / "backends.yaml"), "--policy", policy]
    proc = _start(args + ["--port", str(port)], work / "baseline.log", str(src))
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", [proc])
    except SystemExit:
        _stop([proc])
        raise
    return proc


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


BODY = {
    "model": "llama-2-7b",
    "messages": [{"role": "user", "content": "hello " * 50}],
    "max_tokens": 16,
}


WARMUP = 20
"""Requests sent to each target, one at a time, before the measured loop."""


async def _open_loop(urls: list[str], rate: float, seconds: float) -> list[tuple[list[float], int]]:
    """Send requests at ``rate``/s to each URL for ``seconds``, interleaved (request k to
    urls[k % len(urls)]); per URL, the latencies of the 200 answers and the failures."""
    out: list[tuple[list[float], int]] = [([], 0) for _ in urls]
    failed = [0] * len(urls)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as s:
        for url in urls:  # warm the connections and the gateway
            for _ in range(WARMUP):
                async with s.post(url + "/chat/completions", json=BODY) as r:
                    await r.read()

        async def one(k: int) -> None:
            i = k % len(urls)
            t0 = time.perf_counter()
            try:
                async with s.post(urls[i] + "/chat/completions", json=BODY) as r:
                    await r.read()
                    ok = r.status == 200
            except (TimeoutError, aiohttp.ClientError):
                ok = False
            if ok:
                out[i][0].append(time.perf_counter() - t0)
            else:
                failed[i] += 1

        total = rate * len(urls)
        start, tasks = time.perf_counter(), []
        for k in range(int(total * seconds)):
            await asyncio.sleep(max(0.0, start + k / total - time.perf_counter()))
            tasks.append(asyncio.ensure_future(one(k)))
        await asyncio.gather(*tasks)
    return [(lat, failed[i]) for i, (lat, _) in enumerate(out)]


def _sglang_router(
    urls: list[str], port: int, work: Path, python: str
) -> subprocess.Popen[bytes] | None:
    """sglang-router (``pip install sglang-router``, in ``python``'s environment) over the
    same engines, round robin; None when it is not installed or does not come up."""
    found = subprocess.run(
        [python, "-c", "import sglang_router"], capture_output=True, check=False
    ).returncode
    if found != 0:
        return None
    _check_ports_free(port, 1)
    roots = [u.removesuffix("/v1") for u in urls]
    with open(work / "sglang.log", "ab") as err:
        proc = subprocess.Popen(
            [python, "-m", "sglang_router.launch_router", "--worker-urls", *roots]
            + ["--port", str(port), "--policy", "round_robin", "--log-level", "warn"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(BODY).encode(),
        headers={"Content-Type": "application/json"},
    )
    # Ready once a full round robin over the workers succeeds in a row: the router admits
    # its workers one by one as their health checks pass, and a call it routes to one not
    # yet admitted fails (one success alone left ~22 failures at the start of each run).
    end, in_a_row = time.monotonic() + 60, 0
    while time.monotonic() < end and proc.poll() is None and in_a_row < 2 * len(urls):
        try:
            with urllib.request.urlopen(request, timeout=2) as r:
                in_a_row = in_a_row + 1 if r.status == 200 else 0
        except OSError:
            in_a_row = 0
            time.sleep(0.5)
    if in_a_row >= 2 * len(urls):
        return proc
    proc.terminate()
    return None


def _percentiles(lat: list[float], failed: int) -> dict[str, float]:
    ms = np.asarray(lat) * 1e3
    if not ms.size:
        return {"p50_ms": math.inf, "p99_ms": math.inf, "failed": failed}
    p50, p99 = np.percentile(ms, [50, 99])
    return {"p50_ms": float(p50), "p99_ms": float(p99), "failed": failed}


def overhead(args: argparse.Namespace) -> dict[str, object]:
    """Each rate of ``--rates``: p50/p99 of the engine alone, the gateway and (when
    installed) sglang-router, side by side in one open loop; the gateway's added latency;
    and per target the highest rate whose p99 stays under 50 ms with no failures."""
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        procs, gateway, engines = _stack(args.cluster, args.policy, 0.0, args.port, work)
        router = (
            _sglang_router(engines, args.port + 40, work, args.sglang_python)
            if args.sglang
            else None
        )
        targets = {"engine": engines[0], "gateway": gateway}
        gateways = {"gateway": procs[1]}
        if args.baseline_src is not None:
            try:
                base = _baseline_gateway(args.baseline_src, args.policy, args.port + 60, work)
            except SystemExit:
                _stop(procs)
                raise
            procs.append(base)
            gateways["gateway-baseline"] = base
            targets["gateway-baseline"] = f"http://127.0.0.1:{args.port + 60}/v1"
        if router is not None:
            procs.append(router)
            targets["sglang-router"] = f"http://127.0.0.1:{args.port + 40}/v1"
        # Whose CPU per call is measured: the gateways and the router (its process holds
        # the Rust router's threads; /proc counts them all). Each also answers the WARMUP
        # calls that open every rate's loop.
        measured = dict(gateways) | ({"sglang-router": router} if router is not None else {})
        try:
            for rate in args.rates:
                cpu0 = {name: _cpu_s(p) for name, p in measured.items()}
                got = run_loop(_open_loop(list(targets.values()), rate, args.seconds))
                row: dict[str, object] = {"rate_per_s": rate}
                row |= {name: _percentiles(*g) for name, g in zip(targets, got, strict=True)}
                for name, (lat, failed) in zip(targets, got, strict=True):
                    if name in measured:
                        calls = len(lat) + failed + WARMUP
                        cpu = (_cpu_s(measured[name]) - cpu0[name]) / calls
                        row[name]["cpu_ms_per_request"] = cpu * 1e3  # type: ignore[index]
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
        finally:
            _stop(procs)
    return {
        "policy": args.policy,
        "loop": loop_name(),
        "baseline_src": str(args.baseline_src) if args.baseline_src is not None else None,
        "seconds_per_rate": args.seconds,
        "sglang_router": router is not None,
        "rates": rows,
        "added_ms": [_added(row) for row in rows],
        "max_rate_p99_under_50ms": {name: _max_rate(rows, name) for name in targets},
    }


def _added(row: dict[str, object]) -> dict[str, float]:
    """What each router adds to the engine alone, p50 and p99 (ms)."""
    engine = row["engine"]
    assert isinstance(engine, dict)
    out = {"rate_per_s": float(row["rate_per_s"])}  # type: ignore[arg-type]
    for name in ("gateway", "gateway-baseline", "sglang-router"):
        target = row.get(name)
        if isinstance(target, dict):
            out[f"{name}_p50"] = target["p50_ms"] - engine["p50_ms"]
            out[f"{name}_p99"] = target["p99_ms"] - engine["p99_ms"]
    return out


def _max_rate(rows: list[dict[str, object]], name: str) -> float | None:
    ok = [
        float(r["rate_per_s"])  # type: ignore[arg-type]
        for r in rows
        if r[name]["p99_ms"] < 50 and not r[name]["failed"]  # type: ignore[index]
    ]
    return max(ok) if ok else None


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
    procs, gateway, engines = _stack(
        args.cluster, policy, args.time_scale, args.port, work, deployment
    )
    try:
        t0 = time.perf_counter()
        out = subprocess.run(
            CLI
            + ["loadgen", "--url", gateway, "--cluster", args.cluster]
            + ["--time-scale", str(args.time_scale), "--json", "--allow-failures", *common],
            env=ENV,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        wall = time.perf_counter() - t0
        late = _lateness(engines) | _gateway_counts(gateway)
    finally:
        _stop(procs)
    m = json.loads(out)
    return (
        {k: m[k] for k in KEYS}
        | {"requests_failed": m["requests_failed"], "wall_s": wall, "avg_ttft_s": m["avg_ttft_s"]}
        | late
    )


def _gateway_counts(gateway: str) -> dict[str, float]:
    """The gateway's fallbacks and mean decision time over the run."""
    import urllib.request

    got: dict[str, float] = {}
    with urllib.request.urlopen(gateway.removesuffix("/v1") + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.rpartition(" ")
            for key in (
                "scalesched_gateway_fallbacks_total",
                "scalesched_gateway_decision_seconds_sum",
                "scalesched_gateway_decision_seconds_count",
            ):
                if name.startswith(key):
                    got[key] = got.get(key, 0.0) + float(value)
    passes = got.get("scalesched_gateway_decision_seconds_count", 0.0)
    total = got.get("scalesched_gateway_decision_seconds_sum", 0.0)
    return {
        "fallbacks": got.get("scalesched_gateway_fallbacks_total", 0.0),
        "decision_mean_ms": 1e3 * total / passes if passes else 0.0,
    }


def _lateness(engines: list[str]) -> dict[str, float]:
    """How late the fleet's step loops woke up over the run (wall ms, max and mean): how
    far a CPU-starved emulator fell behind before its virtual clock caught up."""
    import urllib.request

    worst, total, wakeups = 0.0, 0.0, 0.0
    for url in engines:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.rpartition(" ")
                if name.startswith("scalesched_emulator_late_seconds_max"):
                    worst = max(worst, float(value))
                elif name.startswith("scalesched_emulator_late_seconds_total"):
                    total += float(value)
                elif name.startswith("scalesched_emulator_wakeups_total"):
                    wakeups += float(value)
    mean = total / wakeups if wakeups else 0.0
    return {"engine_late_max_ms": worst * 1e3, "engine_late_mean_ms": mean * 1e3}


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
    parser.add_argument(
        "--rates",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[200.0],
        help="overhead: requests per second to each target, a,b,...",
    )
    parser.add_argument(
        "--no-sglang", dest="sglang", action="store_false", help="overhead: skip sglang-router"
    )
    parser.add_argument(
        "--sglang-python",
        default=sys.executable,
        help="overhead: the Python whose environment has sglang-router",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="overhead: also run a gateway from this source tree (a 'src' folder), same loop",
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--fidelity", action="store_true")
    parser.add_argument("--workload", default="agentic-mix")
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--workflows", type=int, default=20)
    parser.add_argument("--time-scale", type=float, default=0.5)
    args = parser.parse_args()
    print(json.dumps(fidelity(args) if args.fidelity else overhead(args), indent=1))


if __name__ == "__main__":
    main()
