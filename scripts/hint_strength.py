"""How strongly the difficulty hint relates to the hidden truth (docs/tail.md).

    python scripts/hint_strength.py [WORKLOAD]

Realises 1500 workflows (seed 123) and prints Spearman correlations of the hint, the
static estimate and the prompt length with the true output tokens (pooled and per role),
and of the tool hint with the true external latency.
"""

import numpy as np, collections
from scipy.stats import spearmanr
from scalesched.workload.source import get_workload, sample_jobs
import sys

src = get_workload(sys.argv[1] if len(sys.argv) > 1 else "agentic-mix")
jobs = sample_jobs(src, [0.0] * 1500, 123)
rows = []
for j in jobs:
    for t in j.workflow.tasks:
        if t.kind == "llm":
            rows.append(
                (
                    t.role or "?",
                    t.output_tokens,
                    t.output_tokens_est,
                    t.difficulty_hint,
                    t.prompt_tokens,
                )
            )
roles = np.array([r[0] for r in rows])
out = np.array([r[1] for r in rows], float)
est = np.array([r[2] for r in rows], float)
h = np.array([r[3] for r in rows])
p = np.array([r[4] for r in rows], float)
print("n", len(rows))
print("spearman hint vs true tokens (pooled)", spearmanr(h, out)[0])
print("spearman est vs true (pooled)", spearmanr(est, out)[0])
print("spearman est*exp(hint) vs true (pooled)", spearmanr(est * np.exp(h), out)[0])
print("spearman prompt vs true", spearmanr(p, out)[0])
ws = []
for r in sorted(set(roles)):
    m = roles == r
    if m.sum() > 50:
        c = spearmanr(h[m], out[m])[0]
        ws.append((c, m.sum()))
        print(
            f"  {r:12s} n={m.sum():6d} rho={c:.3f} ratio_sd={np.std(np.log(out[m] / est[m])):.2f}"
        )
print("within-role weighted", sum(c * n for c, n in ws) / sum(n for c, n in ws))
tt = [
    (t.ext_latency, t.ext_latency_est, t.difficulty_hint)
    for j in jobs
    for t in j.workflow.tasks
    if t.kind == "tool" and t.ext_latency_est > 0
]
a = np.array(tt)
print("tool ext n", len(a), "spearman hint vs ext (pooled)", spearmanr(a[:, 2], a[:, 0])[0])
