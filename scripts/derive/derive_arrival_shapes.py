#!/usr/bin/env python3
"""Derive ``src/scalesched/workload/data/arrival_shapes.json`` from the Splitwise traces.

For each service (code, conv) it counts the requests that arrived in each whole minute of
``<shared>/llm-traces/splitwise_{code,conv}.csv`` (``arrived_at``, seconds from the trace's
start; the last, partial minute is dropped) and stores the counts with their mean: the
relative request rate of one production hour, minute by minute. ``--arrivals azure-conv``
and ``azure-code`` replay that shape at any offered rate
(:func:`scalesched.workload.arrivals.shaped_arrivals`).

Usage: python scripts/derive/derive_arrival_shapes.py [SHARED_DATA_DIR]   (default ../shared/data)
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import numpy as np
from derive_common import reference_folder, write_json  # a sibling

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "scalesched" / "workload" / "data" / "arrival_shapes.json"
BIN_S = 60.0


def main() -> int:
    traces, out = reference_folder(__doc__, OUT, "llm-traces")
    shapes: dict[str, dict] = {}
    for service in ("code", "conv"):
        with (traces / f"splitwise_{service}.csv").open(newline="") as fh:
            times = np.array([float(r["arrived_at"]) for r in csv.DictReader(fh)])
        whole = int(times.max() // BIN_S)  # minutes before the last, partial one
        counts = np.bincount((times // BIN_S).astype(int), minlength=whole + 1)[:whole]
        shapes[f"azure-{service}"] = {
            "source": f"llm-traces/splitwise_{service}.csv:arrived_at",
            "requests": int(np.sum(counts)),
            "bin_s": BIN_S,
            "counts": [int(c) for c in counts],
            "peak_to_mean": round(float(counts.max() / counts.mean()), 3),
            "cv": round(float(counts.std() / counts.mean()), 3),
        }
    doc = {
        "provenance": {
            "source": "Splitwise production traces (Azure LLM inference, 2023; coding and "
            "conversation services), as published with the Splitwise paper and processed by "
            "the Vidur project (microsoft/vidur, MIT licence, commit 7d47513)",
            "script": "scripts/derive/derive_arrival_shapes.py",
            "date": dt.date.today().isoformat(),
            "method": "requests per whole minute of arrived_at; the last, partial minute dropped",
        },
        "shapes": shapes,
    }
    write_json(out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
