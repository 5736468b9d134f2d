"""Run the command line over a corpus of hostile inputs (several variants of each class)
and count tracebacks, hangs, non-finite outputs, multi-line errors and nonsense.

    python benchmarks/hostile_corpus.py [--timeout 60] [--only PREFIX,PREFIX]

Every case runs as its own process (as a user would), so a hang is a real hang. A case
may name the refusal it plants (a needle the one-line error must contain): exit 0 there
is ``nonsense`` (a result printed for input that has none), exit 2 without the needle is
``missed`` (refused, but not for the planted fault). The target is 0 of each; figures in
docs/cluster-and-workload.md ("What bad input does"), per run in docs/history/inputs.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
WF = json.loads((ROOT / "configs" / "workflows" / "support-agent.json").read_text())
TASKS = ("workflow", "specification", "tasks")
RULES = ("workflow", "scalesched", "rules")
SMALL = ["--cluster", "hetero-4", "--workflows", "5", "--rate", "0.5", "--json"]


def setpath(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def task(i: int, key: str) -> tuple[Any, ...]:
    return (*TASKS, i, "scalesched", key)


Case = tuple[str, list[str]] | tuple[str, list[str], str]
"""(name, argv) or (name, argv, needle the refusal must contain)."""


def cases(tmp: Path) -> list[Case]:
    out: list[Case] = list(surface_cases(tmp))

    def wf(name: str, doc: Any = None, text: str | None = None) -> str:
        path = tmp / f"{name}.json"
        path.write_text(text if text is not None else json.dumps(doc, allow_nan=True))
        return str(path)

    def yml(name: str, text: str) -> str:
        path = tmp / f"{name}.yaml"
        path.write_text(text)
        return str(path)

    # deep nesting
    for depth in (1_000, 10_000, 100_000, 1_000_000):
        deep = "[" * depth + "]" * depth
        out.append(
            (
                f"json-deep-{depth}",
                ["simulate", "--workload", wf(f"deep{depth}", text=deep), *SMALL],
            )
        )
        text = json.dumps(WF).replace('"pattern": "support-agent"', f'"pattern": {deep}')
        out.append(
            (
                f"json-deep-field-{depth}",
                ["simulate", "--workload", wf(f"deepf{depth}", text=text), *SMALL],
            )
        )
        out.append(
            (
                f"yaml-deep-{depth}",
                [
                    "simulate",
                    "--cluster",
                    yml(f"deep{depth}", deep),
                    "--workflows",
                    "3",
                    "--rate",
                    "1",
                ],
            )
        )
    # token counts
    for v in (1e308, 10**308, 1e20, 2**64, -1, 10**7):
        for key in ("promptTokens", "outputTokens", "outputTokensEst"):
            out.append(
                (
                    f"tokens-{key}-{v:.3g}",
                    [
                        "simulate",
                        "--workload",
                        wf(f"tok{key}{v:.3g}", setpath(WF, task(4, key), v)),
                        *SMALL,
                    ],
                )
            )
    out.append(
        (
            "tokens-scale",
            [
                "simulate",
                "--workload",
                wf(
                    "tokscale",
                    setpath(WF, task(4, "promptTokens"), {"dist": "code_prompt", "scale": 1e300}),
                ),
                *SMALL,
            ],
        )
    )
    # dynamic structure
    for v in (10**9, 10**6, 10**5, 5000):
        out.append(
            (
                f"maxiter-{v}",
                [
                    "simulate",
                    "--workload",
                    wf(
                        f"loop{v}",
                        setpath(
                            setpath(WF, (*RULES, 1, "maxIter"), v), (*RULES, 1, "continueProb"), 1.0
                        ),
                    ),
                    *SMALL,
                ],
            )
        )
        out.append(
            (
                f"width-{v}",
                [
                    "simulate",
                    "--workload",
                    wf(f"fan{v}", setpath(WF, (*RULES, 0, "width"), v)),
                    *SMALL,
                ],
            )
        )
        out.append(
            (
                f"width-dist-{v}",
                [
                    "simulate",
                    "--workload",
                    wf(
                        f"fand{v}",
                        setpath(WF, (*RULES, 0, "width"), {"dist": "uniformInt", "lo": 1, "hi": v}),
                    ),
                    *SMALL,
                ],
            )
        )
    out.append(
        (
            "width-at-cap-default-run",
            [
                "simulate",
                "--workload",
                wf("fancap", setpath(WF, (*RULES, 0, "width"), 4096)),
                "--cluster",
                "hetero-4",
                "--rate",
                "0.5",
                "--json",
            ],
        )
    )
    # sizes and times
    for key in ("cpuWork", "extLatency"):
        for v in (1e308, 1e300, 1e17):
            doc = setpath(WF, task(5 if key == "cpuWork" else 7, key), v)
            out.append(
                (
                    f"{key}-{v:.0e}-rate",
                    ["simulate", "--workload", wf(f"{key}{v:.0e}", doc), *SMALL],
                )
            )
            out.append(
                (
                    f"{key}-{v:.0e}-load",
                    [
                        "simulate",
                        "--workload",
                        wf(f"{key}{v:.0e}l", doc),
                        "--cluster",
                        "hetero-4",
                        "--workflows",
                        "5",
                        "--load",
                        "0.5",
                        "--json",
                    ],
                )
            )
    out.append(
        (
            "file-size-1e308",
            [
                "simulate",
                "--workload",
                wf(
                    "fsize",
                    setpath(WF, ("workflow", "specification", "files", 0, "sizeInBytes"), 1e308),
                ),
                *SMALL,
            ],
        )
    )
    plain = {
        "workflow": {
            "specification": {"tasks": [{"id": "t"}]},
            "execution": {"tasks": [{"id": "t", "runtimeInSeconds": 1e308}]},
        }
    }
    out.append(("runtime-1e308", ["simulate", "--workload", wf("rt308", plain), *SMALL]))
    zero = {
        "workflow": {
            "specification": {
                "tasks": [{"id": "a", "scalesched": {"kind": "tool", "tool": "x", "cpuWork": 0}}]
            }
        }
    }
    out.append(
        (
            "zero-work-load",
            [
                "simulate",
                "--workload",
                wf("zero", zero),
                "--cluster",
                "hetero-4",
                "--workflows",
                "5",
                "--load",
                "0.5",
            ],
        )
    )
    big = {
        "workflow": {
            "specification": {
                "tasks": [
                    {
                        "id": "a",
                        "scalesched": {
                            "kind": "llm",
                            "model": "llama-2-70b",
                            "promptTokens": 9,
                            "outputTokens": 9,
                        },
                    }
                ]
            }
        }
    }
    out.append(
        (
            "infeasible-model-load",
            [
                "simulate",
                "--workload",
                wf("big", big),
                "--cluster",
                "homogeneous-2:cpu-64c",
                "--workflows",
                "5",
                "--load",
                "0.5",
            ],
        )
    )
    out.append(
        (
            "infeasible-model-rate",
            [
                "simulate",
                "--workload",
                wf("big2", big),
                "--cluster",
                "homogeneous-2:cpu-64c",
                "--workflows",
                "5",
                "--rate",
                "0.5",
            ],
        )
    )
    # options
    for v in ("1e9", "1000000000", "10000000", "-5", "0"):
        out.append(
            (
                f"workflows-{v}",
                ["simulate", "--workflows", v, "--rate", "1", "--cluster", "hetero-4"],
            )
        )
    for v in ("-1", str(2**64), str(-(2**63))):
        out.append(
            (
                f"seed-{v}",
                [
                    "simulate",
                    "--seed",
                    v,
                    "--workflows",
                    "5",
                    "--rate",
                    "1",
                    "--cluster",
                    "hetero-4",
                ],
            )
        )
        out.append(
            (
                f"static-seed-{v}",
                [
                    "static",
                    "--workflow",
                    str(ROOT / "configs/workflows/wfcommons-blast-small.json"),
                    "--network",
                    str(ROOT / "configs/networks/example-4.yaml"),
                    "--seed",
                    v,
                ],
            )
        )
    for v in ("1e-300", "1e-12", "0", "-1", "inf", "nan"):
        out.append(
            (
                f"rate-{v}",
                ["simulate", "--rate", v, "--workflows", "5", "--cluster", "hetero-4", "--json"],
            )
        )
    for v in ("0", "-1", "inf", "nan", "1e300"):
        out.append(
            (
                f"load-{v}",
                ["simulate", "--load", v, "--workflows", "5", "--cluster", "hetero-16", "--json"],
            )
        )
    for cluster in ("hetero-32", "hetero-8", "homogeneous-4"):
        out.append(
            (
                f"mlp16-simulate-{cluster}",
                [
                    "simulate",
                    "--policy",
                    "mlp-16",
                    "--cluster",
                    cluster,
                    "--workflows",
                    "5",
                    "--rate",
                    "1",
                ],
            )
        )
        out.append(
            (
                f"mlp16-run-{cluster}",
                [
                    "run",
                    "--local",
                    "--policy",
                    "mlp-16",
                    "--cluster",
                    cluster,
                    "--workflows",
                    "5",
                    "--rate",
                    "1",
                ],
            )
        )
    out.append(("demo-workflows-neg", ["demo", "--workflows", "-5"]))
    # output paths
    out.append(("trace-dir", ["simulate", *SMALL, "--trace", str(tmp)]))
    out.append(("gantt-dir", ["simulate", *SMALL, "--gantt", str(tmp)]))
    out.append(("gantt-unwritable", ["simulate", *SMALL, "--gantt", "/proc/x.png"]))
    out.append(("gantt-ext", ["simulate", *SMALL, "--gantt", str(tmp / "g.xyz")]))
    out.append(
        ("trace-missing-parent", ["simulate", *SMALL, "--trace", str(tmp / "a" / "b" / "t.jsonl")])
    )
    # checkpoints
    import torch

    from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
    from scalesched.nn import build_network
    from scalesched.nn.checkpoint import save_checkpoint

    cfg = {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES, "d_model": 16, "n_heads": 2}
    good = {
        "network": "scale",
        "network_config": cfg,
        "state_dict": build_network("scale", **cfg).state_dict(),
    }
    bad_shape = copy.deepcopy(good)
    k = next(n for n, v in bad_shape["state_dict"].items() if v.dim() == 2)
    bad_shape["state_dict"][k] = torch.zeros(3, 5)
    nan = copy.deepcopy(good)
    nan["state_dict"][k] = torch.full_like(nan["state_dict"][k], float("nan"))
    ckpts = {
        "shape": bad_shape,
        "kind": {**good, "network": "lstm"},
        "nan": nan,
        "huge-config": {**good, "network_config": {**cfg, "d_model": 1 << 30, "n_heads": 1}},
        "task-dim": {**good, "network_config": {**cfg, "task_dim": 3}},
    }
    for name, payload in ckpts.items():
        path = tmp / f"{name}.pt"
        save_checkpoint(path, payload)
        out.append((f"checkpoint-{name}", ["simulate", "--policy", str(path), *SMALL]))
    (tmp / "empty.pt").write_bytes(b"")
    out.append(("checkpoint-empty", ["simulate", "--policy", str(tmp / "empty.pt"), *SMALL]))
    # clusters
    for n in ("1000000000", "10000000", str(2**62)):
        out.append(
            (
                f"cluster-count-{n}",
                [
                    "simulate",
                    "--cluster",
                    yml(f"count{n}", f"name: x\nservers:\n  - type: cpu-64c\n    count: {n}\n"),
                    "--workflows",
                    "3",
                    "--rate",
                    "1",
                ],
            )
        )
    for kv in (
        "core_speed: 1.0e-300",
        "nic_gbps: 1.0e-300",
        "load_gbs: 1.0e-300",
        "cpu_cores: 1000000000000",
    ):
        out.append(
            (
                f"cluster-{kv.split(':')[0]}",
                [
                    "simulate",
                    "--cluster",
                    yml(
                        f"c{kv[:4]}",
                        f"name: x\nservers:\n  - type: h100-80g-x4\n    {kv}\n  - type: cpu-64c\n",
                    ),
                    "--workflows",
                    "3",
                    "--rate",
                    "1",
                    "--json",
                ],
            )
        )
    out.append(
        (
            "cluster-dup-key",
            [
                "simulate",
                "--cluster",
                yml("dup", "name: x\nservers:\n  - type: cpu-64c\nservers:\n  - type: l4-24g-x4\n"),
                "--workflows",
                "3",
                "--rate",
                "1",
            ],
        )
    )
    out.append(
        (
            "train-config-dup-key",
            ["validate", yml("traindup", "name: a\ntotal_steps: 5\ntotal_steps: 6\n")],
        )
    )
    out.append(("validate-train-config", ["validate", str(ROOT / "configs/train/scale-n16.yaml")]))
    out.append(
        (
            "train-input-baseline-uneven",
            ["validate", yml("trainib", "truncate: true\nnum_envs: 8\ninput_baseline: 3\n")],
            "input_baseline",
        )
    )
    out.append(
        (
            "train-init-missing",
            ["validate", yml("traininit", "init: /nonexistent/scale.pt\n")],
            "init",
        )
    )
    # replay
    for name, lines in {
        "1e17": ["0", "1e17"],
        "1e300": ["0", "1e300"],
        "nan": ["0", "nan"],
        "neg": ["-1", "0"],
        "unsorted": ["5", "1"],
        "short": ["0", "1"],
        "text": ["a", "b"],
    }.items():
        path = tmp / f"replay-{name}.txt"
        path.write_text("\n".join(lines) + "\n")
        out.append(
            (
                f"replay-{name}",
                [
                    "simulate",
                    "--arrivals",
                    f"replay:{path}",
                    "--workflows",
                    "5",
                    "--rate",
                    "1",
                    "--cluster",
                    "hetero-4",
                    "--json",
                ],
            )
        )
    # Ray head
    out.append(
        (
            "ray-unreachable-head",
            [
                "run",
                "--address",
                "127.0.0.1:1",
                "--connect-timeout",
                "5",
                "--workflows",
                "2",
                "--rate",
                "1",
            ],
        )
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--only", default="", help="Run only cases whose name starts so (a,b).")
    args = ap.parse_args()
    counts = dict.fromkeys(
        ("ok", "traceback", "hang", "non_finite", "multi_line", "nonsense", "missed"), 0
    )
    prefixes = tuple(p for p in args.only.split(",") if p)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = [c for c in cases(Path(tmp)) if not prefixes or c[0].startswith(prefixes)]
        for case in corpus:
            name, argv = case[0], case[1]
            needle = case[2] if len(case) == 3 else None
            command = argv if argv[0] == "-c" else ["-m", "scalesched", *argv]
            start = time.perf_counter()
            try:
                p = subprocess.run(
                    [sys.executable, *command],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    cwd=tmp,
                )
            except subprocess.TimeoutExpired:
                verdict, detail = "hang", ""
            else:
                verdict = judge(p.returncode, p.stdout, p.stderr.strip(), needle)
                err = p.stderr.strip()
                detail = (err.splitlines() or [""])[-1][:150] if err else p.stdout[:80]
            counts[verdict] += 1
            print(
                f"{verdict:10} {time.perf_counter() - start:5.1f}s {name:32} {detail}", flush=True
            )
    print(json.dumps({"cases": len(corpus), **counts}))


def judge(code: int, stdout: str, err: str, needle: str | None) -> str:
    """The verdict of one case from its exit code and output."""
    if code not in (0, 2) or "Traceback" in err:
        return "traceback"
    if code == 2 and len(err.splitlines()) != 1:
        return "multi_line"
    if code == 0 and ("NaN" in stdout or "Infinity" in stdout):
        return "non_finite"
    if code == 0 and '"measured_workflows": 0,' in stdout:
        return "nonsense"  # figures of an empty set printed as 0.0
    if needle is not None and code == 0:
        return "nonsense"
    if needle is not None and needle not in err:
        return "missed"
    return "ok"


DRIP = """
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from scalesched.runtime.backends import EndpointConfig, LlmRequestError, OpenAIClient

class Drip(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"choices": [{"message": {"content": "x"}}]}' + b" " * 40
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for i in range(len(body)):  # one byte per 0.25 s: 21 s in all, then it stops
                self.wfile.write(body[i : i + 1]); self.wfile.flush(); time.sleep(0.25)
        except OSError:
            pass
    def log_message(self, *a):
        pass

srv = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
cfg = EndpointConfig(f"http://127.0.0.1:{srv.server_address[1]}/v1", "m", timeout_s=2.0)
start = time.monotonic()
try:
    OpenAIClient(cfg).complete("x", 1)
    outcome = "answered"
except LlmRequestError:
    outcome = "refused"
took = time.monotonic() - start
if outcome == "answered" or took > 3.0:  # a result where the deadline should have refused
    print(f'{{"outcome": "{outcome}", "seconds": {took:.1f}}}')
    sys.exit(0)
print(f"error: deadline kept: refused after {took:.1f} s", file=sys.stderr)
sys.exit(2)
"""


def surface_cases(tmp: Path) -> list[Case]:
    """The newer surfaces: endpoints files, the HTTP deadline, number options, replay
    files, --json of planners and predictors, checkpoints and predictor files, outputs."""
    out: list[Case] = []
    ep_run = ["run", "--address", "127.0.0.1:1", "--connect-timeout", "2", "--llm", "http"]
    ep_run += ["--workflows", "2", "--rate", "1", "--cluster", "hetero-4", "--endpoints"]
    entry = "llama-2-7b:\n  base_url: http://127.0.0.1:8000/v1\n"
    for name, text, needle in (
        ("typo", entry + "  timeot_s: 5\n", "timeot_s"),
        ("nan", entry + "  timeout_s: .nan\n", "timeout_s"),
        ("negative", entry + "  timeout_s: -3\n", "timeout_s"),
        ("zero", entry + "  timeout_s: 0\n", "timeout_s"),
        ("inf", entry + "  timeout_s: .inf\n", "timeout_s"),
        ("url-int", "llama-2-7b:\n  base_url: 8000\n", "base_url"),
        ("placeholder", "llama-2-7b:\n  base_url: http://{host}:1/v1\n", "{host}"),
        ("key-list", entry + "  api_key_env: [A, B]\n", "api_key_env"),
        ("missing-model", entry, "no endpoint"),
        ("unknown-model", "gpt-9:\n  base_url: http://h/v1\n", "gpt-9"),
    ):
        path = tmp / f"ep-{name}.yaml"
        path.write_text(text)
        out.append((f"endpoints-{name}", [*ep_run, str(path)], needle))
    out.append(("http-slow-drip", ["-c", DRIP], "deadline kept"))
    memplan = ["memplan", "--model", "phi-2", "--gpu", "l4", "--no-max-batch"]
    for name, argv, needle in (
        ("plan-rate-nan", ["plan", "--rate", "nan"], "--rate"),
        ("plan-rate-inf", ["plan", "--rate", "inf"], "--rate"),
        ("plan-slo-nan", ["plan", "--rate", "1", "--slo-p95", "nan"], "--slo-p95"),
        ("plan-seed-neg", ["plan", "--rate", "1", "--seed", "-1"], "--seed"),
        ("plan-samples-huge", ["plan", "--rate", "1", "--samples", "1000000000"], "--samples"),
        ("memplan-time-nan", [*memplan, "--time-limit", "nan"], "--time-limit"),
        ("memplan-pcie-inf", [*memplan, "--pcie-gbs", "inf"], "--pcie-gbs"),
        ("tool-repeat-nan", ["simulate", "--tool-repeat", "nan", *SMALL], "--tool-repeat"),
        ("fail-rate-nan", ["run", "--local", "--fail-rate", "nan"], "--fail-rate"),
        ("drift-window-0", ["predict", "drift", "--drift", "x:2@0", "--window", "0"], "--window"),
        ("eval-slo-nan", ["eval", "--slo", "nan", "--policies", "eft"], "--slo"),
        ("shares-seed-neg", ["plan", "shares", "--seed", "-4"], "--seed"),
        ("headroom-limit-nan", ["headroom", "--bound-time-limit", "nan"], "--bound-time-limit"),
        ("headroom-limit-0", ["headroom", "--bound-time-limit", "0"], "--bound-time-limit"),
        ("headroom-repeat-2", ["headroom", "--tool-repeat", "2", "--no-oracle"], "--tool-repeat"),
        ("headroom-kv-typo", ["headroom", "--kv-policy", "lur", "--no-oracle"], "--kv-policy"),
        ("arrivals-shape-typo", ["simulate", "--arrivals", "azure-chat", *SMALL], "--arrivals"),
    ):
        out.append((f"numbers-{name}", argv, needle))
    for name, text, needle in (
        ("typo-first-line", "0.5x\n1\n2\n3\n4\n5\n", "line 1"),
        ("all-zero", "0\n0\n0\n0\n0\n0\n", "span no time"),
        ("long-field", "0\n" + "7" * 300_000 + "\n", "line 2"),
        ("equal-prefix", "0\n0\n0\n0\n0\n1\n2\n", "the first 5 arrival times"),
        ("denormal-prefix", "0\n5e-324\n1e-323\n2e-323\n3e-323\n9\n", "span only"),
        # the prefix spans time, but the measured window (after the one warm-up workflow)
        # does not: its offered rate is undefined
        ("window-one-instant", "0\n1\n1\n1\n1\n", "offer"),
    ):
        path = tmp / f"replay2-{name}.txt"
        path.write_text(text)
        replay = ["simulate", "--arrivals", f"replay:{path}", "--workflows", "5", "--rate", "1"]
        out.append((f"replay2-{name}", [*replay, "--cluster", "hetero-4", "--json"], needle))
    infeasible = ["memplan", "--model", "llama-2-70b", "--gpu", "l4", "--no-max-batch"]
    infeasible += ["--cpu-mem-gb", "1", "--time-limit", "5", "--json"]
    out.append(("jsonout-memplan-infeasible", infeasible))
    out += checkpoint_surface_cases(tmp)
    out += output_path_cases(tmp, memplan)
    out += runtime_cases(tmp)
    return out


LONG_TMPDIR = """
import os, sys, tempfile
long = os.path.join(sys.argv[1], "t" * 90)
os.makedirs(long, exist_ok=True)
os.environ["TMPDIR"] = long  # read by tempfile before anything asks for the temp dir
sys.argv = ["scalesched", "run", "--local", "--cluster", "homogeneous-2", "--workflows", "2",
            "--rate", "1", "--json"]  # --json: no "starting a local Ray cluster" notice
from scalesched.cli import app
app(prog_name="scalesched")
"""


def runtime_cases(tmp: Path) -> list[Case]:
    """Local Ray clusters that cannot start: a folder too long for Ray's sockets, an object
    store larger than the machine's memory."""
    huge_store = ["run", "--local", "--cluster", "homogeneous-2", "--workflows", "2"]
    huge_store += ["--rate", "1", "--object-store-mb", "16000000", "--json"]
    return [
        ("runtime-long-tmpdir", ["-c", LONG_TMPDIR, str(tmp)], "TMPDIR"),
        ("runtime-object-store-16tb", huge_store, "did not start"),
    ]


def output_path_cases(tmp: Path, memplan: list[str]) -> list[Case]:
    """Output paths that cannot be written, each refused before any work."""
    out: list[Case] = []
    plan_json = tmp / "plan.json"  # a valid plan, so only --plot is wrong
    subprocess.run(
        [
            sys.executable,
            "-m",
            "scalesched",
            *memplan,
            "--strategy",
            "none",
            "--out",
            str(plan_json),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    for name, argv, needle in (
        ("memplan-plot", [*memplan, "--plot", str(tmp / "p.xyz")], "--plot"),
        ("memplan-out", [*memplan, "--out", str(tmp / "no" / "p.json")], "--out"),
        ("plan-out-dir", ["plan", "--rate", "1", "--out", str(tmp)], "--out"),
        ("predict-fit-out", ["predict", "fit", "--out", "/proc/no/m.npz"], "--out"),
        ("static-gantt", ["static", "--workflow",
                          str(ROOT / "configs/workflows/wfcommons-blast-small.json"), "--network",
                          str(ROOT / "configs/networks/example-4.yaml"), "--gantt",
                          str(tmp / "g.xyz")], "--gantt"),
        ("replay-plot", ["memplan", "replay", str(plan_json), "--plot", str(tmp / "r.doc")],
         "--plot"),
    ):  # fmt: skip
        out.append((f"outpath-{name}", argv, needle))
    return out


def checkpoint_surface_cases(tmp: Path) -> list[Case]:
    """Checkpoints of absurd config or huge weights; predictor files of the wrong types."""
    import numpy as np
    import torch

    from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
    from scalesched.nn import build_network
    from scalesched.nn.checkpoint import save_checkpoint

    cfg = {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES, "d_model": 16, "n_heads": 2}
    state = build_network("scale", **cfg).state_dict()
    out: list[Case] = []
    for name, scale in (("1e30", 1e30), ("1e18", 1e18)):
        huge = {k: v * scale if v.is_floating_point() else v for k, v in state.items()}
        path = tmp / f"ckpt2-{name}.pt"
        save_checkpoint(path, {"network": "scale", "network_config": cfg, "state_dict": huge})
        out.append((f"ckpt2-weights-{name}", ["simulate", "--policy", str(path), *SMALL], "probe"))
    for name, change in (("heads", {"n_heads": 10**6}), ("prior", {"heuristic_prior": 1e300})):
        path = tmp / f"ckpt2-{name}.pt"
        payload = {"network": "scale", "network_config": {**cfg, **change}, "state_dict": state}
        save_checkpoint(path, payload)
        key = next(iter(change))
        out.append((f"ckpt2-config-{name}", ["simulate", "--policy", str(path), *SMALL], key))
    from scalesched.predict.model import default_predictor, save

    good = tmp / "pred.npz"
    save(default_predictor(), good)
    with np.load(good) as data:
        arrays = {k: data[k] for k in data.files}
    for name, key in (("static-text", "static_tokens"), ("weights-text", "duration.w0")):
        typed: dict[str, Any] = dict(arrays)
        typed[key] = np.full(arrays[key].shape, "1")
        path = tmp / f"predictor-{name}.npz"
        np.savez(path, **typed)
        out.append((f"predictor-{name}", ["predict", "eval", "--model", str(path)], key))
    _ = torch  # torch is needed by save_checkpoint; imported here to fail early if absent
    return out


if __name__ == "__main__":
    main()
