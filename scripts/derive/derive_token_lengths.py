#!/usr/bin/env python3
"""Derive ``src/scalesched/workload/data/token_lengths.json`` from the Splitwise traces.

For each of code_prompt, code_output, conv_prompt, conv_output (num_prefill_tokens and
num_decode_tokens of ``<shared>/llm-traces/splitwise_{code,conv}.csv``) it stores the 101
quantiles 0%, 1%, ..., 100% (numpy's default linear method), the 11 tail quantiles 99.0%,
99.1%, ..., 100% (the top percentile of output lengths is long: interpolating it linearly
from p99 to the maximum would inflate the code_output mean by 22%), count, mean, min, max.

Usage: python scripts/derive/derive_token_lengths.py [SHARED_DATA_DIR]   (default ../shared/data)
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import numpy as np
from derive_common import reference_folder, write_json  # a sibling

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "scalesched" / "workload" / "data" / "token_lengths.json"
COLUMNS = {"prompt": "num_prefill_tokens", "output": "num_decode_tokens"}


def main() -> int:
    traces, out = reference_folder(__doc__, OUT, "llm-traces")
    dists: dict[str, dict] = {}
    for workload in ("code", "conv"):
        with (traces / f"splitwise_{workload}.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        for short, column in COLUMNS.items():
            x = np.array([int(r[column]) for r in rows], dtype=float)
            q = np.quantile(x, np.linspace(0.0, 1.0, 101))
            tail = np.quantile(x, np.linspace(0.99, 1.0, 11))
            dists[f"{workload}_{short}"] = {
                "source": f"llm-traces/splitwise_{workload}.csv:{column}",
                "count": int(x.size),
                "mean": round(float(x.mean()), 3),
                "min": int(x.min()),
                "max": int(x.max()),
                "quantiles": [round(float(v), 3) for v in q],
                "tail_quantiles": [round(float(v), 3) for v in tail],
            }
    doc = {
        "provenance": {
            "source": "Splitwise production traces (Azure LLM inference, 2023; coding and "
            "conversation services), as published with the Splitwise paper and processed by "
            "the Vidur project (microsoft/vidur, MIT licence, commit 7d47513)",
            "script": "scripts/derive/derive_token_lengths.py",
            "date": dt.date.today().isoformat(),
            "quantiles": "101 quantiles at 0, 1, ..., 100 percent and tail_quantiles at 99.0, "
            "99.1, ..., 100 percent (numpy linear method)",
        },
        "dists": dists,
    }
    write_json(out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
