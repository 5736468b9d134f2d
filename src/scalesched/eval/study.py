"""The scale-generalisation study: every policy x cluster size x seed, on identical workloads.

One run is a pure function of (policy, N, seed, scenario), so runs go to a process pool in
any order and the results are the same. The workload of a seed is the same for every policy
(common random numbers): jobs are built from the seed alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from typing import Any

from scalesched.errors import InputError
from scalesched.eval.windows import ANY_BOUNDS, BOUNDS, SERIES, share_windows
from scalesched.stats import mean_ci as mean_ci  # re-exported for older callers

STATUS_OK = "ok"
STATUS_UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class StudyConfig:
    """What to compare and on what."""

    policies: tuple[str, ...]
    nodes: tuple[int, ...]
    seeds: tuple[int, ...]
    workload: str = "agentic-mix"
    load: float = 0.7
    workflows: int | None = 1500
    """Workflows per run (None: ``auto``, grown until the answer is precise, see
    ``scalesched.runs.length``). The warm-up each run finds (MSER, the largest among the
    policies of a seed) and the last 10% (the run-out) are run but not measured."""
    cluster_family: str = "hetero"
    """Clusters are ``<family>-<N>`` presets."""
    deployment: str | None = None
    """A deployment file pinning model replicas (one N only: it names its servers)."""
    clusters: tuple[str, ...] = ()
    """Named clusters (presets or YAML files) instead of ``<family>-<N>``; ``nodes`` must be
    their sizes, one cluster per size (the tables are keyed by N)."""
    kv_policy: str | None = None
    """KV state across LLM calls (``scalesched.cache.kv``); None: memoryless engines."""
    tool_repeat: float = 0.0
    """Probability a tool call repeats an earlier identical one (``workload.repeats``)."""
    tool_cache: bool = False
    """Repeated tool calls reuse their finished original's result (``sim.tool_cache``)."""
    logits_cache: bool | None = None
    """Re-sampled branches reuse logits (True) or are measured only (False); None: neither
    (``sim.logits_cache``)."""
    arrivals: str = "poisson"
    """Arrival process (``Scenario.arrivals``): every policy of a seed sees the same times."""
    residency: str = "dynamic"
    """The world (``scalesched.runs.world``): the commands pass ``planned``, their default;
    a library caller chooses."""

    def cluster_for(self, n: int) -> str:
        """The cluster spec the runs of size ``n`` use."""
        if not self.clusters:
            return f"{self.cluster_family}-{n}"
        return self.clusters[self.nodes.index(n)]


def named_clusters(specs: Sequence[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Sizes and specs of named clusters, checked: each loads, and no two share a size."""
    from scalesched.cluster import get_cluster

    sizes: dict[int, str] = {}
    for spec in specs:
        n = len(get_cluster(spec).servers)
        if n in sizes:
            raise InputError(
                "--clusters",
                "clusters",
                f"{spec} and {sizes[n]} both have {n} servers; the "
                "tables are keyed by size, so give one cluster per size",
            )
        sizes[n] = spec
    return tuple(sizes), tuple(sizes.values())


@dataclass(frozen=True)
class RunSpec:
    policy: str
    n: int
    seed: int
    workload: str
    load: float
    workflows: int
    cluster: str
    """Preset name or YAML path."""
    deployment: str | None = None
    kv_policy: str | None = None
    tool_repeat: float = 0.0
    tool_cache: bool = False
    logits_cache: bool | None = None
    arrivals: str = "poisson"
    residency: str = "dynamic"


def run_specs(cfg: StudyConfig) -> list[RunSpec]:
    if cfg.workflows is None:
        raise ValueError("run_specs needs a run length; auto is resolved by the pipeline")
    return [
        RunSpec(
            p,
            n,
            s,
            cfg.workload,
            cfg.load,
            cfg.workflows,
            cfg.cluster_for(n),
            cfg.deployment,
            cfg.kv_policy,
            cfg.tool_repeat,
            cfg.tool_cache,
            cfg.logits_cache,
            cfg.arrivals,
            cfg.residency,
        )
        for n in cfg.nodes
        for s in cfg.seeds
        for p in cfg.policies
    ]


def run_one(spec: RunSpec) -> dict[str, Any]:
    """One simulation; a row of results.csv (metrics of ``simulate --json`` plus identity)."""
    import torch

    torch.set_num_threads(1)
    from scalesched.policies import get_policy
    from scalesched.runs.setup import Scenario, prepare, run

    row: dict[str, Any] = {
        "policy": spec.policy,
        "n_servers": spec.n,
        "seed": spec.seed,
        "workload": spec.workload,
        "load": spec.load,
        "arrivals": spec.arrivals,
    }
    setup = prepare(
        spec.cluster,
        Scenario(
            workload=spec.workload,
            workflows=spec.workflows,
            load=spec.load,
            seed=spec.seed,
            tool_repeat=spec.tool_repeat,
            arrivals=spec.arrivals,
            residency=spec.residency,
        ),
        deployment=spec.deployment,
    )
    row.update(setup.world.metrics())
    scheduler = get_policy(spec.policy)
    recorder = getattr(scheduler, "record_features", None)
    if recorder is not None:
        scheduler.record_features = True  # type: ignore[attr-defined]
    if not scheduler.supports(spec.n):
        # A scale-locked network: it has no answer at this N, and we do not invent one.
        reason = str(scheduler.unsupported_reason(spec.n))
        row.update(status=STATUS_UNSUPPORTED, note=reason.replace(scheduler.name, spec.policy, 1))
        return row
    result = run(
        setup,
        scheduler,
        kv_policy=spec.kv_policy,
        tool_cache=spec.tool_cache,
        logits_cache=spec.logits_cache,
    )
    metrics: dict[str, Any] = dict(result.metrics)
    metrics[SERIES] = result.series  # the shared window and paired batches (eval.windows)
    metrics[BOUNDS] = result.series_lower_bounds
    metrics[ANY_BOUNDS] = result.series_any_deployment_bounds
    metrics.pop("policy", None)
    metrics.pop("n_servers", None)
    row.update(metrics)
    row["policy_label"] = result.metrics["policy"]
    row["status"] = STATUS_OK
    stats_fn = getattr(scheduler, "feature_stats", None)
    if stats_fn is not None:
        stats = stats_fn().get(spec.n)
        if stats:
            row["feature_mean"] = stats["mean"]
            row["feature_var"] = stats["var"]
            row["feature_offdiag_corr"] = stats["mean_abs_offdiag_corr"]
    return row


def resolve_capacities(cfg: StudyConfig) -> None:
    """Measure (or read) each cluster's capacity here, once, so that parallel workers find
    it in the cache instead of each measuring it again."""
    from scalesched.cluster import get_cluster
    from scalesched.runs.capacity import capacity_wps

    for n in cfg.nodes:
        spec = get_cluster(cfg.cluster_for(n))
        capacity_wps(spec, cfg.workload)
        if cfg.residency == "planned" and cfg.deployment is None:
            from scalesched.runs.world import resolve_world

            # Measures the planned world's capacity and plans for the offered rate here,
            # once: the workers find both in the caches.
            resolve_world(spec, cfg.workload, "planned", rate=None, load=cfg.load)


def check_policies(policies: Iterable[str]) -> None:
    """Fail early, with one line, on a policy name that does not resolve."""
    from scalesched.policies import get_policy

    for name in policies:
        get_policy(name)


def run_study(
    cfg: StudyConfig,
    *,
    jobs: int | None = None,
    on_done: Callable[[int, int], None] | None = None,
    executor: str = "process",
    ray_address: str | None = None,
) -> list[dict[str, Any]]:
    """All runs of the study, sorted by (N, seed, policy order)."""
    if not cfg.policies or not cfg.nodes or not cfg.seeds:
        raise InputError("eval", "policies/nodes/seeds", "each needs at least one value")
    check_policies(cfg.policies)
    resolve_capacities(cfg)
    specs = run_specs(cfg)
    rows: list[dict[str, Any]] = []
    workers = jobs or os.cpu_count() or 1
    if executor == "ray":
        from scalesched.runtime.scaleout import run_on_ray

        rows = run_on_ray(run_one, specs, address=ray_address, on_done=on_done)
    else:
        rows = run_parallel(run_one, specs, 1 if executor == "serial" else workers, on_done)
    order = {p: i for i, p in enumerate(cfg.policies)}
    rows.sort(key=lambda r: (r["n_servers"], r["seed"], order[r["policy"]]))
    share_windows(rows)
    return rows


def run_parallel(
    fn: Callable[[Any], dict[str, Any]],
    specs: Sequence[Any],
    workers: int,
    on_done: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """``fn`` over ``specs`` in a process pool of ``workers`` (in this process for 1), in
    completion order; ``on_done(done, total)`` after each. A worker that dies (killed for
    memory, say) stops the study with one line naming ``--jobs``, not a traceback."""
    rows: list[dict[str, Any]] = []
    if workers == 1:
        for i, spec in enumerate(specs):
            rows.append(fn(spec))
            if on_done:
                on_done(i + 1, len(specs))
        return rows
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(fn, spec) for spec in specs]
            for i, fut in enumerate(as_completed(futures)):
                rows.append(fut.result())
                if on_done:
                    on_done(i + 1, len(specs))
    except BrokenProcessPool:
        raise InputError(
            "--jobs",
            "jobs",
            f"a worker process of {workers} died before its run ended (killed, perhaps for "
            "memory): run fewer at a time (--jobs 1) or shorter runs",
        ) from None
    return rows


def parse_int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(
            option, option.lstrip("-"), f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise InputError(option, option.lstrip("-"), "values must be positive integers")
    return values


def seeds_from(count_or_list: str) -> tuple[int, ...]:
    """``5`` means seeds 0..4; ``3,7,9`` lists them, and ``7,`` is seed 7 alone (a lone
    number is a count)."""
    try:
        if "," in count_or_list:
            seeds = tuple(int(x) for x in count_or_list.split(",") if x.strip())
        else:
            seeds = tuple(range(min(int(count_or_list), MAX_SEEDS + 1)))
    except ValueError:
        raise InputError(
            "--seeds", "seeds", f"expected a count or a list, got {count_or_list!r}"
        ) from None
    if not seeds:
        raise InputError("--seeds", "seeds", "need at least one seed")
    if len(seeds) > MAX_SEEDS:
        raise InputError("--seeds", "seeds", f"at most {MAX_SEEDS} seeds")
    if any(not 0 <= s < 2**63 for s in seeds):
        raise InputError("--seeds", "seeds", "seeds must be integers in [0, 2**63 - 1]")
    return seeds


MAX_SEEDS = 1000
"""Most seeds of one study (each is a run per policy and size)."""


def config_dict(cfg: StudyConfig) -> dict[str, Any]:
    return asdict(cfg)
