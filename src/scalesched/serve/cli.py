"""The serving commands: ``engine``, ``fleet``, ``serve``, ``loadgen``.

This package is an executor, below the policies and the studies, so what those layers
provide is passed in by ``scalesched.cli`` when it registers the commands: ``get_policy``
(a policy name or checkpoint to a scheduler), ``build_jobs`` (a scenario's jobs, its
``--load`` resolved against the cluster's capacity), ``plan_world`` (the deployment a
fleet runs in the planned world) and ``progress`` (the commands' one
progress helper, so loadgen's progress looks like every other command's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from scalesched.errors import InputError, clean_errors
from scalesched.serve.fleet import FLEET_HOST, FLEET_PORT

PolicyLoader = Callable[[str], Any]
JobBuilder = Callable[[Any, Any], list[Any]]
WorldPlanner = Callable[[Any, str, float | None, float], tuple[float | None, Any, dict[str, str]]]
"""``(cluster, workload, rate, load)`` -> the offered rate, the planned deployment (None:
no plan, the reason in the world's ``world_note``) and the world's names
(``scalesched.runs.world.resolve_world``)."""
ProgressFactory = Callable[[bool, int, str], Any]
"""The commands' progress helper: ``(show, total, label)`` -> a context manager giving a
``tick(done)`` (``scalesched.commands.common.progress_bar``)."""


def _check_scale(value: float, option: str, zero_ok: bool) -> None:
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        bound = ">= 0" if zero_ok else "> 0"
        raise InputError(
            option, option.lstrip("-"), f"must be a finite number {bound}, got {value}"
        )


def _check_port(port: int, count: int = 1) -> None:
    """``--port`` (and the ``count - 1`` ports after it, for a fleet) must be in 1..65535:
    the same rule a backends file's base_url is held to."""
    from scalesched.cluster.endpoints import port_problem

    problem = port_problem(port, count)
    if problem:
        raise InputError("--port", "port", problem)


def _need_serve_extra(command: str) -> None:
    """The serving libraries are an extra: say how to get them instead of a traceback."""
    try:
        import aiohttp  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise InputError(
            command, exc.name or "aiohttp", "not installed: pip install 'scalesched[serve]'"
        ) from None


def engine(
    server_type: Annotated[str, typer.Option(help="Catalog server type the engine emulates.")],
    model: Annotated[list[str], typer.Option(help="Catalog model to serve (repeatable).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    time_scale: Annotated[float, typer.Option(help="Wall seconds per model second.")] = 1.0,
    instant: Annotated[
        bool, typer.Option(help="Answer at once (what a gateway's overhead is measured on).")
    ] = False,
) -> None:
    """Run one emulated OpenAI-compatible engine timed by the cost model."""
    _need_serve_extra("engine")
    from scalesched.serve.engine import EngineServer, run_engines, server_of_type
    from scalesched.serve.site import configure_logging

    _check_scale(time_scale, "--time-scale", zero_ok=False)
    _check_port(port)
    scale = 0.0 if instant else time_scale
    server = EngineServer(server_of_type(server_type), {m: m for m in model}, scale)
    configure_logging()
    run_engines([server], host, port, lambda urls: typer.echo(f"serving {urls[0]}", err=True))


FleetWorkloadOpt = Annotated[
    str, typer.Option(help="Workload the deployment is planned for (preset or file).")
]
FleetResidencyOpt = Annotated[
    str,
    typer.Option(
        help="planned: run the deployment the planner makes for --rate (or --load of the "
        "planned world's capacity), as `simulate` does; dynamic: every catalog model "
        "resident on every GPU server it fits (as --models does). Ignored with --deployment."
    ),
]
FleetRateOpt = Annotated[
    float | None,
    typer.Option(help="Workflows/s the deployment is planned for (overrides --load)."),
]
FleetLoadOpt = Annotated[
    float,
    typer.Option(help="Plan for this fraction of the planned world's capacity (as simulate)."),
]
FleetModelsOpt = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated catalog models, each on every server it fits (no plan: "
        "the dynamic world's fleet) [default: planned]."
    ),
]
FleetDeploymentOpt = Annotated[
    Path | None,
    typer.Option(
        help="Deployment YAML: run exactly its replicas (as `simulate --deployment` "
        "does) instead of a planned one."
    ),
]
DeploymentOutOpt = Annotated[
    Path | None,
    typer.Option(
        help="Write the deployment the fleet runs here, for `serve --deployment` "
        "(a planned or a given one)."
    ),
]


def fleet(
    cluster: Annotated[str, typer.Option(help="Cluster preset or YAML file.")] = "hetero-16",
    workload: FleetWorkloadOpt = "agentic-mix",
    residency: FleetResidencyOpt = "planned",
    rate: FleetRateOpt = None,
    load: FleetLoadOpt = 0.7,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = FLEET_HOST,
    port: Annotated[
        int, typer.Option(help="First port; one port per GPU server that serves a model.")
    ] = FLEET_PORT,
    time_scale: Annotated[float, typer.Option(help="Wall seconds per model second.")] = 1.0,
    instant: Annotated[
        bool, typer.Option(help="Answer at once (what a gateway's overhead is measured on).")
    ] = False,
    models: FleetModelsOpt = None,
    backends_out: Annotated[
        Path | None, typer.Option(help="Write the backends file for `serve` here.")
    ] = None,
    deployment: FleetDeploymentOpt = None,
    deployment_out: DeploymentOutOpt = None,
) -> None:
    """Run one emulated engine per GPU server of a deployment, in one process: by default
    one planned for the offered rate (docs/worlds.md)."""
    _need_serve_extra("fleet")
    from scalesched.cluster import get_cluster
    from scalesched.cluster.tables import ClusterTables
    from scalesched.errors import check_output_path
    from scalesched.serve.engine import EngineServer, run_engines
    from scalesched.serve.fleet import fleet_backends_yaml, fleet_servers
    from scalesched.serve.site import configure_logging

    _check_scale(time_scale, "--time-scale", zero_ok=False)
    _check_port(port)
    for out, option in ((backends_out, "--backends-out"), (deployment_out, "--deployment-out")):
        if out is not None:
            check_output_path(out, option)
    spec = get_cluster(cluster)
    chosen = [m.strip() for m in models.split(",") if m.strip()] if models else None
    pinned, world = _fleet_deployment(spec, workload, residency, rate, load, chosen, deployment)
    tables = ClusterTables(spec, pinned) if pinned is not None else None
    plan = fleet_servers(spec, chosen, pinned)
    _check_port(port, len(plan))
    if deployment_out is not None:
        _write_deployment(pinned, spec, deployment_out)
    scale = 0.0 if instant else time_scale
    engines = [EngineServer(server, served, scale, tables) for server, served in plan]

    def ready(urls: list[str]) -> None:  # once every engine listens: no line before an error
        typer.echo(world, err=True)
        if backends_out is not None:  # what plan --backends-out writes for this fleet
            backends_out.write_text(fleet_backends_yaml(plan, host, port), encoding="utf-8")
        typer.echo(f"{len(urls)} engines on {urls[0]} .. {urls[-1]}", err=True)
        if backends_out is not None:
            typer.echo(f"backends file written to {backends_out}", err=True)

    configure_logging()
    run_engines(engines, host, port, ready)


def _fleet_deployment(
    spec: Any,
    workload: str,
    residency: str,
    rate: float | None,
    load: float,
    models: list[str] | None,
    deployment: Path | None,
) -> tuple[Any, str]:
    """The deployment a fleet runs (None: every chosen model on every server it fits) and
    the line that names its world: the file given, the plan for the offered rate (the
    planned world, through the ``plan_world`` the CLI provides), or none."""
    from scalesched.cluster.deployment import load_deployment_file

    if deployment is not None and models:
        raise InputError("--models", "models", "give --models or --deployment, not both")
    if residency not in ("planned", "dynamic"):
        raise InputError(
            "--residency", "residency", f"must be planned or dynamic, got {residency!r}"
        )
    if deployment is not None:
        pinned = load_deployment_file(deployment, spec)
        return pinned, f"world: deployment {pinned.name} (from {deployment})"
    if models or residency == "dynamic":
        why = "--models" if models else "--residency dynamic"
        return None, f"world: dynamic ({why}): every model on every GPU server it fits"
    offered, pinned, named = _PROVIDED["plan_world"](spec, workload, rate, load)
    if pinned is None:
        return None, f"world: dynamic ({named['world_note']})"
    return pinned, f"world: planned, deployment {pinned.name} for {offered:.4g} workflows/s"


def _write_deployment(deployment: Any, spec: Any, out: Path) -> None:
    """``deployment`` as a YAML file ``serve --deployment`` reads (none: refused, since a
    dynamic fleet runs no deployment)."""
    import yaml

    from scalesched.cluster.deployment import deployment_to_dict

    if deployment is None:
        raise InputError("--deployment-out", "deployment", "this fleet runs no deployment")
    data = deployment_to_dict(deployment.name, spec.name, list(deployment.replicas))
    try:
        out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise InputError(str(out), "--deployment-out", f"cannot write: {exc}") from None


def serve(
    backends: Annotated[Path, typer.Option(help="Backends file (YAML).")],
    policy: Annotated[str, typer.Option(help="Policy name or checkpoint.")] = "eft",
    fallback: Annotated[
        str, typer.Option(help="Heuristic that answers when the policy fails.")
    ] = "least_loaded",
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    time_scale: Annotated[
        float, typer.Option(help="Wall seconds per model second of the backends (1: real).")
    ] = 1.0,
    max_pending: Annotated[
        int, typer.Option(help="Requests in the gateway at once; beyond it, 429.")
    ] = 4096,
    scrape_s: Annotated[
        float, typer.Option(help="Seconds between scrapes of the backends' /metrics.")
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the policy's random choices.")] = 0,
    deployment: Annotated[
        Path | None,
        typer.Option(
            help="Deployment YAML the backends run (e.g. a `fleet --deployment`): the "
            "decisions use its replicas' engines; backends are matched to its servers by name."
        ),
    ] = None,
    cluster: Annotated[
        str, typer.Option(help="Cluster preset or YAML file the --deployment is for.")
    ] = "hetero-16",
    forward_priority: Annotated[
        str | None,
        typer.Option(
            help="Backends (comma-separated names, or all) whose requests carry the policy's "
            "admission priority (e.g. plas, shortest_remaining, fcfs_workflow set one) as an "
            "integer priority field: the value times 1000, rounded; lower first. They must "
            "accept it: vLLM with --scheduling-policy priority, SGLang with "
            "--enable-priority-scheduling --schedule-low-priority-values-first. Default: "
            "none, bodies pass unchanged."
        ),
    ] = None,
) -> None:
    """Serve an OpenAI-compatible API that places every call with a scalesched policy."""
    _need_serve_extra("serve")
    from scalesched.cluster import get_cluster
    from scalesched.cluster.deployment import load_deployment_file
    from scalesched.cluster.endpoints import load_backends_file
    from scalesched.serve.gateway import Gateway, priority_backends
    from scalesched.serve.loop import loop_name
    from scalesched.serve.site import configure_logging, run_apps

    _check_scale(time_scale, "--time-scale", zero_ok=False)
    _check_scale(scrape_s, "--scrape-s", zero_ok=False)
    _check_port(port)
    if max_pending < 1:
        raise InputError("--max-pending", "max-pending", "must be at least 1")
    entries = load_backends_file(str(backends))
    prioritized = priority_backends(forward_priority, entries)
    pinned = (
        load_deployment_file(deployment, get_cluster(cluster)) if deployment is not None else None
    )
    scheduler, backup = _gateway_policies(policy, fallback, len(entries))
    gateway = Gateway(
        entries,
        scheduler,
        backup,
        time_scale=time_scale,
        max_pending=max_pending,
        scrape_s=scrape_s,
        seed=seed,
        deployment=pinned,
        backends_source=str(backends),
        forward_priority=prioritized,
    )
    configure_logging()

    def ready(urls: list[str]) -> None:  # called once the port is bound, not before
        where = f"{urls[0]} over {len(entries)} backends"
        typer.echo(f"serving {where}, {policy}, on {loop_name()}", err=True)

    run_apps([gateway.app()], host, port, ready, stop_on_sigterm=True)


def _gateway_policies(policy: str, fallback: str, backends: int) -> tuple[Any, Any]:
    """The gateway's policy and its fallback, each checked to place over this many backends
    before the gateway listens, so a misfit is a one-line error, not a failed request."""
    scheduler, backup = _PROVIDED["get_policy"](policy), _PROVIDED["get_policy"](fallback)
    for sched, option in ((scheduler, "--policy"), (backup, "--fallback")):
        if not sched.supports(backends):
            raise InputError(option, option.lstrip("-"), str(sched.unsupported_reason(backends)))
    return scheduler, backup


def loadgen(
    url: Annotated[str, typer.Option(help="Base URL up to /v1 (a gateway or an engine).")],
    workload: Annotated[str, typer.Option(help="Workload name or file.")] = "agentic-mix",
    rate: Annotated[float | None, typer.Option(help="Workflows per model second.")] = None,
    load: Annotated[
        float | None, typer.Option(help="Arrival rate as a fraction of --cluster's capacity.")
    ] = None,
    workflows: Annotated[int, typer.Option(help="Workflows to run.")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the jobs and arrivals.")] = 0,
    cluster: Annotated[
        str, typer.Option(help="Cluster the jobs are sized for (the fleet's).")
    ] = "hetero-16",
    time_scale: Annotated[
        float, typer.Option(help="Wall seconds per model second (the fleet's).")
    ] = 1.0,
    timeout_s: Annotated[float, typer.Option(help="Deadline of one request, wall s.")] = 600.0,
    allow_failures: Annotated[
        bool,
        typer.Option(
            "--allow-failures",
            help="Exit 0 even when workflows failed (a fault test); by default any failed "
            "workflow makes the exit code 1, after the report.",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print one JSON object (strict: null, not NaN, when undefined)."
        ),
    ] = False,
) -> None:
    """Drive workflows against an OpenAI-compatible URL as agents would; report times.

    The URL is probed first (GET /models): a wrong one fails at once with exit code 2."""
    _need_serve_extra("loadgen")
    from scalesched.cluster import get_cluster
    from scalesched.cluster.tables import ClusterTables
    from scalesched.serve.loadgen import LoadGenerator, check_url, probe_url
    from scalesched.sim.scenario import Scenario

    _check_scale(time_scale, "--time-scale", zero_ok=False)
    _check_scale(timeout_s, "--timeout-s", zero_ok=False)
    if (rate is None) == (load is None):
        raise InputError("--rate", "--rate", "give exactly one of --rate and --load")
    if workflows < 1:
        raise InputError("--workflows", "--workflows", "must be at least 1")
    url = check_url(url)
    probe_url(url)  # before the jobs: --load may measure capacity, which takes a while
    scenario = Scenario(
        workload=workload, workflows=workflows, load=load or 0.0, rate=rate, seed=seed
    )
    jobs = _PROVIDED["build_jobs"](ClusterTables(get_cluster(cluster)), scenario)
    result = _run_with_progress(LoadGenerator, url, jobs, time_scale, timeout_s, not as_json)
    metrics = result.metrics()
    _report_load(metrics, as_json)
    failed = metrics["workflows_failed"]
    if failed and not allow_failures:
        typer.echo(
            f"error: {failed} of {len(jobs)} workflows failed ({_errors_text(metrics['errors'])}); "
            "--allow-failures accepts that",
            err=True,
        )
        raise typer.Exit(1)


UNDEFINED_WHY = "no workflow (or, for TTFT, no request) completed, so it is undefined"
"""What a ``null`` figure of ``loadgen --json`` means."""


def _report_load(metrics: dict[str, Any], as_json: bool) -> None:
    """One strict JSON object (undefined figures null, each with its reason), or aligned
    ``name  value`` lines."""
    from scalesched.errors import print_json

    if as_json:
        print_json(metrics, {k: UNDEFINED_WHY for k in metrics})
        return
    for key, value in metrics.items():
        if key == "errors":
            text = _errors_text(value)
        elif isinstance(value, float):
            text = f"{value:.4g}" if math.isfinite(value) else "n/a (none completed)"
        else:
            text = str(value)
        typer.echo(f"{key:>22}  {text}")


def _errors_text(errors: dict[str, int]) -> str:
    """Failed requests by kind, as ``http 404: 12, ClientConnectorError: 3``."""
    return ", ".join(f"{kind}: {n}" for kind, n in errors.items()) or "none"


_PROVIDED: dict[str, Any] = {}
"""What the upper layers provide (set by ``register``)."""


def register(
    app: typer.Typer,
    *,
    get_policy: PolicyLoader,
    build_jobs: JobBuilder,
    progress: ProgressFactory,
    plan_world: WorldPlanner,
) -> None:
    """Add the four serving commands to ``app``."""
    _PROVIDED.update(
        get_policy=get_policy, build_jobs=build_jobs, progress=progress, plan_world=plan_world
    )
    for command in (engine, fleet, serve, loadgen):
        app.command()(clean_errors(command))


def _run_with_progress(
    generator: Any, url: str, jobs: list[Any], time_scale: float, timeout_s: float, show: bool
) -> Any:
    """Run the load with the commands' progress over workflows (a bar on a terminal,
    plain lines elsewhere)."""
    done = 0
    with _PROVIDED["progress"](show, len(jobs), "workflows") as tick:

        def one_done() -> None:
            nonlocal done
            done += 1
            tick(done)

        return generator(
            url, jobs, time_scale=time_scale, timeout_s=timeout_s, on_workflow_done=one_done
        ).run()
