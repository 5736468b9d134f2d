"""How strongly the difficulty hint relates to the hidden truth (docs/tail.md).

    python research/hint_strength.py [WORKLOAD]

Realises 1500 workflows (seed 123) and prints Spearman correlations of the hint, the
static estimate and the prompt length with the true output tokens (pooled and per role),
and of the tool hint with the true external latency.
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.stats import spearmanr

from scalesched.workload.source import get_workload, sample_jobs


def rho(a: np.ndarray, b: np.ndarray) -> float:
    return float(spearmanr(a, b)[0])


def main(workload: str) -> None:
    jobs = sample_jobs(get_workload(workload), [0.0] * 1500, 123)
    tasks = [t for j in jobs for t in j.workflow.tasks]
    llm = [t for t in tasks if t.kind == "llm"]
    roles = np.array([t.role or "?" for t in llm])
    out = np.array([t.output_tokens for t in llm], dtype=float)
    est = np.array([t.output_tokens_est for t in llm], dtype=float)
    hint = np.array([t.difficulty_hint for t in llm])
    prompt = np.array([t.prompt_tokens for t in llm], dtype=float)
    print(f"{workload}: {len(llm)} LLM tasks")
    print(f"hint vs true tokens, pooled       {rho(hint, out):.3f}")
    print(f"static estimate vs true, pooled   {rho(est, out):.3f}")
    print(f"estimate x e^hint vs true, pooled {rho(est * np.exp(hint), out):.3f}")
    print(f"prompt length vs true, pooled     {rho(prompt, out):.3f}")
    per_role = []
    for role in sorted(set(roles)):
        sel = roles == role
        if sel.sum() > 50:
            r = rho(hint[sel], out[sel])
            per_role.append((r, int(sel.sum())))
            print(f"  {role:12s} n={sel.sum():6d} rho={r:.3f}")
    weighted = sum(r * n for r, n in per_role) / sum(n for _, n in per_role)
    print(f"hint vs true tokens, within role (weighted) {weighted:.3f}")
    tools = [t for t in tasks if t.kind == "tool" and t.ext_latency_est > 0]
    ext = np.array([t.ext_latency for t in tools])
    tool_hint = np.array([t.difficulty_hint for t in tools])
    print(f"tool hint vs true ext latency ({len(tools)} tasks) {rho(tool_hint, ext):.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "agentic-mix")
