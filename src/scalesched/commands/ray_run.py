"""``scalesched run``'s options and steps: the runtime options checked before Ray starts,
the run on a local or an existing Ray cluster, its figures (with the simulator's beside
them on ``--compare``), and its report.

The command in ``scalesched.cli`` declares the options and calls these in order; the run
itself is ``scalesched.runtime.run_jobs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from scalesched.commands.common import console, err_console, metrics_table
from scalesched.errors import InputError, print_json, require_completed, require_finite

MAX_TIME_SCALE = 100.0
"""Wall seconds per model second at most: beyond it a run is a wait, not a test."""
MIN_OBJECT_STORE_MB = 75
"""The smallest object store Ray starts a node with, MiB."""

LocalOpt = Annotated[
    bool, typer.Option("--local", help="Start a local Ray cluster, one node per server.")
]
AddressOpt = Annotated[
    str | None, typer.Option(help="Connect to this Ray cluster instead (ray.init address).")
]
ConnectTimeoutOpt = Annotated[
    float, typer.Option(help="Seconds to wait for the Ray head at --address.")
]
TimeScaleOpt = Annotated[
    float, typer.Option(help="Wall seconds per model second of emulated work.")
]
MaxRetriesOpt = Annotated[int, typer.Option(help="Extra attempts of a task that raises.")]
LlmOpt = Annotated[
    str, typer.Option(help="LLM backend: emulated (cost model) or http (--endpoints).")
]
EndpointsOpt = Annotated[
    Path | None, typer.Option(help="YAML/JSON: model -> OpenAI-compatible endpoint.")
]
FailRateOpt = Annotated[
    float, typer.Option(help="Inject failures: probability that a task attempt raises.")
]
CompareOpt = Annotated[
    bool, typer.Option(help="Also simulate the same jobs; add sim_* keys and ratios.")
]
ObjectStoreOpt = Annotated[
    int, typer.Option(help="Object store per local node, MiB (at least 75).")
]


@dataclass(frozen=True)
class RayOptions:
    """Where and how the run executes: a local cluster or an address, the emulation's
    time scale, retries, injected faults and the LLM backend."""

    local: bool
    address: str | None
    connect_timeout: float
    time_scale: float
    max_retries: int
    llm: str
    endpoints: Path | None
    fail_rate: float
    object_store_mb: int


def check_ray_options(options: RayOptions) -> None:
    """Every runtime option checked, and Ray importable, before anything starts."""
    o = options
    if o.local == (o.address is not None):
        raise InputError("--local/--address", "cluster", "give exactly one of them")
    if not (math.isfinite(o.time_scale) and 0 < o.time_scale <= MAX_TIME_SCALE):
        raise InputError(
            "--time-scale",
            "time_scale",
            f"must be in (0, {MAX_TIME_SCALE:g}], got {o.time_scale}",
        )
    if o.local and o.object_store_mb < MIN_OBJECT_STORE_MB:
        raise InputError("--object-store-mb", "object_store_mb", "Ray needs at least 75 MiB")
    if o.max_retries < 0 or not 0 <= o.fail_rate <= 1:
        raise InputError("--max-retries/--fail-rate", "faults", "need retries >= 0, 0 <= rate <= 1")
    if o.llm not in ("emulated", "http") or (o.llm == "http") != (o.endpoints is not None):
        raise InputError("--llm", "llm", "emulated, or http together with --endpoints FILE")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError("--local/--address", "ray", "pip install 'scalesched[runtime]'") from None


def served_endpoints(options: RayOptions) -> Any:
    """The ``--endpoints`` file's model -> endpoint table (None for the emulated backend)."""
    from scalesched.runtime.backends import load_endpoints

    return load_endpoints(options.endpoints) if options.endpoints is not None else None


def runtime_config(options: RayOptions, setup: Any, served: Any, seed: int) -> Any:
    """The runtime's configuration; with real endpoints, checked to serve every model the
    jobs call before Ray starts, so a missing model fails here, not on a worker."""
    from scalesched.runtime import FaultConfig, RuntimeConfig
    from scalesched.runtime.backends import check_endpoints_cover, models_called

    if served is not None:
        check_endpoints_cover(served, models_called(setup.jobs), str(options.endpoints))
    return RuntimeConfig(
        time_scale=options.time_scale,
        max_retries=options.max_retries,
        llm_backend="http" if options.llm == "http" else "emulated",
        endpoints=served,
        faults=FaultConfig(fail_rate=options.fail_rate, seed=seed),
        deployment=setup.deployment,
    )


def run_on_ray(
    options: RayOptions, setup: Any, scheduler: Any, config: Any, seed: int, quiet: bool
) -> Any:
    """The run on a local cluster started for it, or on the cluster at ``--address``
    (connected to for the run unless the caller is connected already)."""
    from scalesched.runtime import run_jobs

    spec, jobs, tables = setup.cluster, setup.jobs, setup.tables
    if options.local:
        from scalesched.runtime.cluster import local_cluster

        if not quiet:
            err_console.print(f"starting a local Ray cluster: {len(spec)} nodes + head ...")
        with local_cluster(spec, object_store_mb=options.object_store_mb):
            return run_jobs(spec, jobs, scheduler, config, seed=seed, tables=tables)
    import ray

    own = not ray.is_initialized()  # library callers may be connected already
    if own:
        from scalesched.runtime.cluster import wait_for_head

        wait_for_head(options.address or "auto", options.connect_timeout)
        ray.init(address=options.address, log_to_driver=False)
    try:
        return run_jobs(spec, jobs, scheduler, config, seed=seed, tables=tables)
    finally:
        if own:
            ray.shutdown()


def ray_run_metrics(
    result: Any, setup: Any, policy: str, seed: int, compare: bool
) -> dict[str, Any]:
    """The run's figures: the runtime's own, the simulator's of the same jobs beside them
    on ``compare``, and the load figures from the jobs' arrivals; refused when not finite
    or when workflows failed (the first failure named)."""
    from scalesched.kernel.metrics import whole_run_window

    metrics: dict[str, Any] = dict(result.metrics)
    jobs = setup.jobs
    if compare:
        from scalesched.eval.fidelity import fidelity
        from scalesched.policies import get_policy

        metrics.update(
            fidelity(
                setup.cluster,
                jobs,
                get_policy(policy),
                metrics,
                result.response_times,
                seed=seed,
                tables=setup.tables,
            )
        )
    # The load figures first: the runtime's own come out 0 (it measures every workflow and
    # is handed no arrival times), and the completeness check reads the offered rate.
    metrics.update(whole_run_window([job.arrival for job in jobs], result.response_times))
    require_finite(metrics, "run")
    first = result.failures[0] if result.failures else None
    require_completed(
        metrics,
        "run",
        f"{len(result.failures)} failed, first {first.name} at {first.task}: {first.error}"[:300]
        if first is not None
        else "",
    )
    return metrics


def report_ray_run(metrics: dict[str, Any], result: Any, title: str, as_json: bool) -> None:
    """The figures as one JSON object, or as the table followed by why the run is not in
    the world asked for (if it is not), the first failures and the servers lost."""
    if as_json:
        print_json(metrics)
        return
    console.print(metrics_table(title, metrics))
    if metrics.get("world_note"):
        err_console.print(f"note: {metrics['world_note']}")
    for failure in result.failures[:10]:
        err_console.print(f"failed: {failure.name} at {failure.task}: {failure.error}")
    if result.dead_servers:
        err_console.print(f"servers lost: {', '.join(result.dead_servers)}")
