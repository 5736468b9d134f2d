"""Run the command line over a corpus of hostile inputs (issue 11's classes, several
variants each) and count tracebacks, hangs, non-finite outputs and multi-line errors.

    python benchmarks/hostile_corpus.py [--timeout 60] [--out results/hostile]

Every case runs as its own process (as a user would), so a hang is a real hang. The target
is 0 of each; figures in docs/inputs.md.
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


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []

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
    args = ap.parse_args()
    counts = {"ok": 0, "traceback": 0, "hang": 0, "non_finite": 0, "multi_line": 0}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = cases(Path(tmp))
        for name, argv in corpus:
            start = time.perf_counter()
            try:
                p = subprocess.run(
                    [sys.executable, "-m", "scalesched", *argv],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    cwd=tmp,
                )
            except subprocess.TimeoutExpired:
                verdict, detail = "hang", ""
            else:
                err = p.stderr.strip()
                if p.returncode not in (0, 2) or "Traceback" in err:
                    verdict = "traceback"
                elif p.returncode == 2 and len(err.splitlines()) != 1:
                    verdict = "multi_line"
                elif p.returncode == 0 and ("NaN" in p.stdout or "Infinity" in p.stdout):
                    verdict = "non_finite"
                else:
                    verdict = "ok"
                detail = (err.splitlines() or [""])[-1][:150] if err else p.stdout[:80]
            counts[verdict] += 1
            print(
                f"{verdict:10} {time.perf_counter() - start:5.1f}s {name:32} {detail}", flush=True
            )
    print(json.dumps({"cases": len(corpus), **counts}))


if __name__ == "__main__":
    main()
