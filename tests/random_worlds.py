"""Random jobs and random deployments for tests that compare bounds across worlds
(tests/kernel/test_records.py, tests/eval/headroom/test_allocation.py)."""

from __future__ import annotations

import random
from fractions import Fraction

from scalesched.cluster.deployment import Deployment, deployment_from_dict
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import GPU_SHARES, MODELS, TP_DEGREES, replica_fits
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance


def random_jobs(rng: random.Random, models: tuple[str, ...], n: int = 12) -> list[Job]:
    """Chains and fan-outs of LLM calls of ``models`` and a tool, sizes drawn by ``rng``."""
    jobs = []
    for w in range(n):
        calls = [
            TaskInstance(
                f"c{i}",
                "llm",
                model=rng.choice(models),
                prompt_tokens=rng.randint(1, 6000),
                output_tokens=rng.randint(1, 900),
            )
            for i in range(rng.randint(1, 5))
        ]
        tool = TaskInstance("t", "tool", tool="code_exec", cpu_work=rng.uniform(0.1, 3.0))
        tasks = (*calls, tool)
        # c0 first; the other calls after it, in parallel; the tool after all of them
        parents = ((), *(((0,),) * (len(calls) - 1)), tuple(range(len(calls))))
        children: list[tuple[int, ...]] = [() for _ in tasks]
        for i, ps in enumerate(parents):
            for p in ps:
                children[p] = (*children[p], i)
        wf = WorkflowInstance(f"w{w}", "test", tasks, parents, tuple(children), {})
        jobs.append(Job(w, float(w), wf))
    return jobs


def random_deployment(rng: random.Random, spec: ClusterSpec) -> Deployment:
    """Replica groups drawn at random (tp, share, count) where they fit, GPU shares
    tracked so that the file validates."""
    replicas = []
    for server in spec.servers:
        if server.gpu_type is None or server.gpus <= 0:
            continue
        free = [Fraction(1)] * server.gpus
        for model in rng.sample(list(MODELS), k=len(MODELS)):
            options = [
                (tp, share)
                for tp in TP_DEGREES
                for share in GPU_SHARES
                if tp <= server.gpus and replica_fits(model, server.gpu_type, tp, share)
            ]
            if not options or rng.random() < 0.3:
                continue
            tp, share = rng.choice(options)
            for _ in range(rng.randint(1, 4)):
                gpus = sorted(range(server.gpus), key=lambda g: -free[g])[:tp]
                if any(free[g] < Fraction(share) for g in gpus):
                    break
                for g in gpus:
                    free[g] -= Fraction(share)
                replicas.append(
                    {"model": model, "server": server.name, "gpus": gpus, "share": share}
                )
    data = {"name": "random", "replicas": replicas}
    return deployment_from_dict(data, spec, "test")
