"""What a workload asks of each LLM, from sample workflows: the planner's only input.

For every model: calls per workflow and the token shapes of its calls.  For every sample
workflow: its contention-free critical path, split into the parts the Aggregate LLM
Pipeline rescales (per model: prefill seconds on a reference engine, output tokens, calls)
and the part it does not (tools and their external latency).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalesched.cluster.perf import MODELS, TP_DEGREES, ReplicaGroupPerf, replica_group_perf
from scalesched.errors import InputError
from scalesched.workload.source import get_workload

REFERENCE_GPU = "H100-80G"
"""The reference engine of a model: its smallest fitting tp on whole H100s."""
DEFAULT_SAMPLES = 1000
DEFAULT_SEED = 20261


def reference_engine(model: str) -> ReplicaGroupPerf:
    for tp in TP_DEGREES:
        try:
            return replica_group_perf(model, REFERENCE_GPU, tp, 1.0)
        except InputError:
            continue
    raise InputError("planner", "model", f"{model} fits on no H100 tp group")  # pragma: no cover


@dataclass(frozen=True)
class ModelCalls:
    """The calls one model receives, pooled over the sample workflows."""

    model: str
    calls_per_workflow: float
    prompt: np.ndarray
    """Prompt tokens of every sampled call."""
    output: np.ndarray
    """Output tokens (truth) of every sampled call."""

    @property
    def mean_output(self) -> float:
        return float(self.output.mean())

    @property
    def busy_context(self) -> float:
        """Mean context a decoding request holds, weighted by how long it decodes."""
        ctx = self.prompt + self.output // 2
        return float((self.output * ctx).sum() / max(1, self.output.sum()))

    @property
    def busy_kv(self) -> float:
        """Mean KV tokens reserved per running request, weighted by decode time."""
        need = self.prompt + self.output
        return float((self.output * need).sum() / max(1, self.output.sum()))


@dataclass(frozen=True)
class WorkloadProfile:
    workload: str
    models: tuple[str, ...]
    """Models the workload calls, in column order of the matrices below."""
    calls: dict[str, ModelCalls]
    base_s: np.ndarray
    """(W,) seconds of tools and external latency on each workflow's critical path."""
    prefill_ref_s: np.ndarray
    """(W, M) reference-engine prefill seconds of each model's critical-path calls."""
    out_tokens: np.ndarray
    """(W, M) output tokens of each model's critical-path calls."""
    n_calls: np.ndarray
    """(W, M) count of each model's critical-path calls."""
    ref_prefill_mean_s: dict[str, float]
    """Mean reference prefill seconds per call of each model."""

    @property
    def n_workflows(self) -> int:
        return int(self.base_s.shape[0])


def workload_profile(
    workload: str, samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED
) -> WorkloadProfile:
    """Sample ``samples`` workflows and take their contention-free critical paths apart."""
    if samples < 1:
        raise InputError("--samples", "samples", "must be >= 1")
    source = get_workload(workload)
    rng = np.random.default_rng(seed)
    wfs = [source.sample(rng) for _ in range(samples)]
    used = sorted({t.model for wf in wfs for t in wf.tasks if t.kind == "llm" and t.model})
    for m in used:
        if m not in MODELS:
            raise InputError(workload, "model", f"unknown model {m!r}")
    col = {m: j for j, m in enumerate(used)}
    refs = {m: reference_engine(m) for m in used}
    w_n, m_n = len(wfs), len(used)
    base = np.zeros(w_n)
    pre = np.zeros((w_n, m_n))
    out = np.zeros((w_n, m_n))
    cnt = np.zeros((w_n, m_n))
    prompts: dict[str, list[int]] = {m: [] for m in used}
    outputs: dict[str, list[int]] = {m: [] for m in used}
    for wi, wf in enumerate(wfs):
        n = len(wf.tasks)
        finish = np.zeros(n)
        # per task: the critical path ending there, as (base, prefill[M], out[M], count[M])
        path = np.zeros((n, 1 + 3 * m_n))
        for i, task in enumerate(wf.tasks):
            parents = wf.parents[i]
            if parents:
                p = max(parents, key=lambda k: finish[k])
                start, path[i] = finish[p], path[p]
            else:
                start = 0.0
            if task.kind == "llm" and task.model:
                j, ref = col[task.model], refs[task.model]
                o = max(1, task.output_tokens)
                pf = ref.prefill_s(task.prompt_tokens)
                cost = pf + o * ref.decode_step_s(1, task.prompt_tokens + o // 2)
                path[i, 1 + j] += pf
                path[i, 1 + m_n + j] += o
                path[i, 1 + 2 * m_n + j] += 1
                prompts[task.model].append(task.prompt_tokens)
                outputs[task.model].append(o)
            else:
                cost = task.cpu_work + task.ext_latency
                path[i, 0] += cost
            finish[i] = start + cost
        end = int(np.argmax(finish)) if n else 0
        if n:
            base[wi] = path[end, 0]
            pre[wi] = path[end, 1 : 1 + m_n]
            out[wi] = path[end, 1 + m_n : 1 + 2 * m_n]
            cnt[wi] = path[end, 1 + 2 * m_n :]
    calls = {
        m: ModelCalls(
            m,
            len(prompts[m]) / w_n,
            np.array(prompts[m], dtype=np.int64),
            np.array(outputs[m], dtype=np.int64),
        )
        for m in used
    }
    ref_pf = {m: float(np.mean([refs[m].prefill_s(int(p)) for p in prompts[m]])) for m in used}
    return WorkloadProfile(workload, tuple(used), calls, base, pre, out, cnt, ref_pf)
