"""The ``scalesched`` command: a thin face over the library.

Every bad input ends as one line on stderr and exit code 2 (``InputError``), never a
traceback.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from scalesched.commands import ray_run
from scalesched.commands.common import (
    ArrivalsOpt,
    KvPolicyOpt,
    ProgressOpt,
    ToolCacheOpt,
    ToolRepeatOpt,
    announce,
    check_outputs,
    cluster_and_policy,
    console,
    err_console,
    kv_policy_mode,
    logits_cache_mode,
    print_markdown,
    progress_bar,
    tool_cache_on,
    write_run_outputs,
)
from scalesched.commands.panels import install_panels, panel_order
from scalesched.commands.plain_help import install_plain_help
from scalesched.errors import (
    InputError,
    check_output_path,
    clean_errors,
    print_json,
)
from scalesched.options import install_number_checks


class _OneLineErrors(typer.core.TyperGroup):
    """Usage errors (a bad option value, an unknown option) as one line and exit code 2,
    like every other bad input, instead of click's usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        click = typer.core._click  # the click typer runs on (typer bundles its own)

        kwargs["standalone_mode"] = False
        install_number_checks(self)  # every number option ranged, NaN/inf refused
        install_plain_help(self)  # plain types, no reST or stray Rich markup in --help
        install_panels(self)  # --help grouped by task
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            typer.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.command_path}: " if ctx is not None else ""
            message = " ".join(exc.format_message().split())
            typer.echo(f"error: {where}{message}", err=True)
            sys.exit(exc.exit_code)
        except InputError as exc:  # a number out of range, found while parsing
            typer.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands in the order of their help panels (``commands.panels``)."""
        return panel_order(super().list_commands(ctx))


app = typer.Typer(
    cls=_OneLineErrors,
    help="Schedule agentic LLM workflows on heterogeneous GPU/CPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from scalesched import __version__

        typer.echo(f"scalesched {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    core: Annotated[
        str | None,
        typer.Option(
            help="The simulator's core for every run of the command (and its worker "
            "processes): compiled, the C++ core built at install (the same results, about "
            "20x faster for the built-in heuristics, 1.5x for a learned policy; falls back "
            "to python with one warning where the install has none), or python, the "
            "reference engine. Default: $SCALESCHED_CORE, else compiled. Give it before "
            "the command: scalesched --core python simulate ...",
        ),
    ] = None,
) -> None:
    """Schedule agentic LLM workflows on heterogeneous GPU/CPU clusters."""
    if core is not None:
        if core not in ("python", "compiled"):
            raise InputError("--core", "core", f"must be python or compiled, got {core!r}")
        # The environment, not an argument threaded through every run: worker processes
        # (--jobs, Ray) inherit it, and Simulation reads it where no core is given.
        import os

        os.environ["SCALESCHED_CORE"] = core


ClusterOpt = Annotated[
    str,
    typer.Option(help="Cluster preset (hetero-N, homogeneous-N, homogeneous-N:TYPE) or YAML file."),
]
WorkloadOpt = Annotated[
    str, typer.Option(help="Workload preset (see `scalesched workloads`) or WfFormat JSON file.")
]
SeedOpt = Annotated[
    int,
    typer.Option(
        min=0, max=2**63 - 1, help="Seed of every random choice; same seed, same numbers."
    ),
]
PolicyOpt = Annotated[
    str,
    typer.Option(
        help="Scheduler name (see `scalesched policies`), with options as NAME:KEY=VALUE,... "
        "(e.g. rollout:horizon_s=10), or a checkpoint path."
    ),
]
WorkflowsOpt = Annotated[int, typer.Option(help="Number of workflows that arrive.")]
AutoWorkflowsOpt = Annotated[
    str,
    typer.Option(
        "--workflows",
        help="Workflows per run, or 'auto': start at max(2000, 16 x servers) and double "
        "until the 95% CI is within --precision of the figure and the runs are steady "
        "(at most --max-workflows).",
    ),
]
PrecisionOpt = Annotated[
    float,
    typer.Option(
        help="With --workflows auto: the CI half-width to reach, as a share of the figure "
        "(a run's mean response time; in eval and demo, the learned policy's paired ratio "
        "to the best heuristic, or the best heuristic's mean without one)."
    ),
]
MaxWorkflowsOpt = Annotated[
    int | None,
    typer.Option(
        help="With --workflows auto: the longest run tried [default: max(32000, 4 x the "
        "first run)]."
    ),
]
LoadOpt = Annotated[
    float,
    typer.Option(
        help="Arrival rate as a fraction of the cluster's measured capacity for the workload "
        "(`scalesched capacity`; measured once per cluster and workload, then cached)."
    ),
]
WarmupOpt = Annotated[
    int | None,
    typer.Option(
        help="First workflows (in arrival order) run but left out of the metrics "
        "[default: found from the run's responses by MSER]."
    ),
]
CooldownOpt = Annotated[
    int | None,
    typer.Option(
        help="Last workflows left out of the metrics: a run-out that keeps the cluster "
        "loaded while the measured workflows finish [default: 10% of --workflows]."
    ),
]
ResidencyOpt = Annotated[
    str,
    typer.Option(
        help="planned: run on a deployment the planner makes for the offered rate, --load a "
        "fraction of that world's capacity (falls back to dynamic, with a note, where "
        "planning sustains less); dynamic: one engine per model per server, models loaded "
        "on demand (the older world, its figures reproduced exactly). Ignored with "
        "--deployment."
    ),
]
RateOpt = Annotated[
    float | None, typer.Option(help="Arrival rate in workflows/s (overrides --load).")
]
DeploymentOpt = Annotated[
    Path | None,
    typer.Option(
        help="Deployment YAML (e.g. from `scalesched plan`): pinned replicas replace dynamic "
        "model loading, and LLM tasks go only to servers holding their model."
    ),
]


LogitsCacheOpt = Annotated[
    str,
    typer.Option(
        help="on: branches of a test-time-scaling fan-out (best-of-n, self-consistency, "
        "tree-of-thought presets) take the tokens they repeat from their group's first path "
        "out of the engine's stored logits, and ride a running sibling instead of decoding "
        "them; the stored rows are charged to KV memory. measure: nothing is reused but the "
        "same branch figures are reported (branch_service_mean_s, branch_reused_frac, ...), "
        "for a paired comparison. off: neither. See docs/cache.md."
    ),
]


TraceOpt = Annotated[
    Path | None,
    typer.Option(help="Write the per-task trace (JSON lines) here, e.g. results/trace.jsonl."),
]
GanttOpt = Annotated[
    Path | None, typer.Option(help="Write a Gantt chart here, e.g. results/gantt.png.")
]


ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Print ratios from runs that did not reach steady state (marked 'not steady') "
        "instead of withholding them.",
    ),
]


@app.command()
@clean_errors
def simulate(
    cluster: ClusterOpt = "hetero-16",
    workload: WorkloadOpt = "agentic-mix",
    policy: PolicyOpt = "tail",
    residency: ResidencyOpt = "planned",
    workflows: AutoWorkflowsOpt = "auto",
    precision: PrecisionOpt = 0.01,
    max_workflows: MaxWorkflowsOpt = None,
    load: LoadOpt = 0.7,
    rate: RateOpt = None,
    arrivals: ArrivalsOpt = "poisson",
    seed: SeedOpt = 0,
    warmup: WarmupOpt = None,
    cooldown: CooldownOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object of metrics instead of a table.")
    ] = False,
    trace: TraceOpt = None,
    gantt: GanttOpt = None,
    progress: ProgressOpt = True,
    deployment: DeploymentOpt = None,
    kv_policy: KvPolicyOpt = "off",
    tool_repeat: ToolRepeatOpt = 0.0,
    tool_cache: ToolCacheOpt = "off",
    logits_cache: LogitsCacheOpt = "off",
) -> None:
    """Simulate one workload on one cluster with one policy and report response times
    (``--workflows auto`` grows the run until its mean is as precise as asked)."""
    from scalesched.commands.simulate import (
        Recording,
        cache_modes,
        report_simulation,
        show_progress,
        simulate_auto,
        simulate_run,
    )
    from scalesched.runs.length import check_precision, parse_workflows
    from scalesched.runs.setup import Scenario, prepare
    from scalesched.runs.world import check_residency

    check_outputs(trace, gantt)
    caches = cache_modes(kv_policy, tool_cache, logits_cache, tool_repeat)
    spec, scheduler = cluster_and_policy(cluster, policy)
    count = parse_workflows(workflows)
    check_precision(precision)

    def run_at(n: int) -> Any:
        scenario = Scenario(
            workload=workload,
            workflows=n,
            load=load,
            rate=rate,
            arrivals=arrivals,
            seed=seed,
            tool_repeat=tool_repeat,
            residency=check_residency(residency),
        )
        setup = prepare(spec, scenario, deployment=deployment)
        recording = Recording(trace, gantt, warmup, cooldown)
        show = show_progress(progress, as_json)
        label = f"{policy} on {spec.name}"
        result = simulate_run(setup, scheduler, caches, recording, label, show)
        result.metrics.update(setup.world.metrics())
        return result

    if count is None:
        result = simulate_auto(run_at, len(spec), arrivals, precision, max_workflows)
    else:
        result = run_at(count)
    chart_title = f"{policy} on {spec.name}, {workload}, seed {seed}"
    write_run_outputs(result, trace, gantt, chart_title, trace_written=gantt is None)
    title = f"{policy} on {spec.name} ({len(spec)} servers), {workload}, seed {seed}"
    report_simulation(result.metrics, title, as_json)


@app.command()
@clean_errors
def capacity(
    cluster: ClusterOpt = "hetero-16",
    workload: WorkloadOpt = "agentic-mix",
    remeasure: Annotated[
        bool, typer.Option(help="Measure again even when a cached figure exists.")
    ] = False,
    method: Annotated[
        str,
        typer.Option(
            help="With --remeasure: fast (screened policies, early stop, large clusters "
            "scaled from a smaller one of the same mix) or full (the shipped table's method)."
        ),
    ] = "fast",
    residency: ResidencyOpt = "planned",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show each probe run as it finishes.")] = True,
) -> None:
    """Measure the arrival rate the cluster sustains for the workload (what --load 1.0 means).

    Capacity is the throughput the best of eft, least_loaded and kv_aware delivers just past
    saturation (offer 1.25x the estimate, take what is delivered, until it settles); in the
    planned world (the default), on a deployment re-planned at each step. The figure is
    cached per cluster, workload and world; `cached` says whether this one came from a
    cache. See docs/steady-state.md and docs/planning.md for the methods.
    """
    from scalesched.cluster import get_cluster
    from scalesched.runs.capacity import capacity_report
    from scalesched.runs.world import check_residency, planned_capacity_report

    spec = get_cluster(cluster)
    verbose = progress and not as_json
    if check_residency(residency) == "planned":
        payload = planned_capacity_report(spec, workload, remeasure=remeasure, verbose=verbose)
    else:
        payload = capacity_report(
            spec, workload, remeasure=remeasure, method=method, verbose=verbose
        )
    if as_json:
        print_json(payload)
        return
    table = Table(title=f"capacity of {spec.name} ({len(spec)} servers) for {workload}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for k, v in payload.items():
        if isinstance(v, dict):
            v = ", ".join(f"{p} {x:.4g}" for p, x in v.items())
        table.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    console.print(table)


def _print_pairs(title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title)
    table.add_column("name")
    table.add_column("description")
    for name, desc in rows:
        table.add_row(name, desc)
    console.print(table)


ListingJsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON list: name, description, research_only (true for an ablation, "
        "oracle or study variant) and research_reason.",
    ),
]


@app.command()
def policies(as_json: ListingJsonOpt = False) -> None:
    """List the scheduling policies; research-only ones (ablations, oracles, study
    variants) are marked."""
    from scalesched.commands.listings import policy_rows, print_listing

    print_listing("policies", policy_rows(), as_json)


@app.command()
def clusters() -> None:
    """List cluster presets and server types."""
    from scalesched.cluster import list_cluster_presets, list_server_types

    _print_pairs("cluster presets", list_cluster_presets())
    _print_pairs("server types", list_server_types())


@app.command()
def workloads(as_json: ListingJsonOpt = False) -> None:
    """List workload presets; research-only ones (kept only to reproduce a study) are
    marked."""
    from scalesched.commands.listings import print_listing, workload_rows

    print_listing("workloads", workload_rows(), as_json)


@app.command()
@clean_errors
def validate(
    file: Annotated[Path, typer.Argument(help="A cluster YAML file or a WfFormat JSON workflow.")],
) -> None:
    """Check a cluster or workflow file and say what it holds."""
    if file.suffix.lower() in (".yaml", ".yml"):
        from scalesched.cluster import load_cluster_file

        if _looks_like_training_config(file):
            from scalesched.train.ppo import load_config

            cfg = load_config(file)
            console.print(f"ok: training config {cfg.name!r}: {cfg.total_steps} steps")
            return
        spec = load_cluster_file(file)
        gpus = sum(s.gpus for s in spec.servers)
        console.print(f"ok: cluster {spec.name!r}: {len(spec)} servers, {gpus} GPUs")
        return
    if file.suffix.lower() == ".json":
        import numpy as np

        from scalesched.workload.source import get_workload

        source = get_workload(str(file))
        wf = source.sample(np.random.default_rng(0))
        console.print(f"ok: workflow {source.name!r}: {len(wf.tasks)} tasks in one realisation")
        return
    raise InputError(
        str(file),
        "file",
        "validate takes a cluster file (.yaml/.yml), a training config (.yaml) or a WfFormat "
        "workflow (.json)",
    )


def _looks_like_training_config(file: Path) -> bool:
    """A YAML mapping without ``servers`` whose keys are training-config fields."""
    from dataclasses import fields

    from scalesched.errors import parse_yaml

    try:
        data = parse_yaml(file.read_text(encoding="utf-8"), str(file))
    except (InputError, OSError, UnicodeDecodeError):
        return False  # the cluster loader reports it
    if not isinstance(data, dict) or not data or "servers" in data:
        return False
    from scalesched.train import ppo

    return set(data) <= {f.name for f in fields(ppo.PPOConfig)}


@app.command()
@clean_errors
def train(
    config: Annotated[
        Path | None, typer.Option(help="Training config YAML (fields of PPOConfig).")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help="A shipped config by name, instead of --config (e.g. dagger-tail-n16); "
            "the files are in configs/train of a source checkout."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Run folder: checkpoints, CSV and TensorBoard logs [default: a dagger "
            "config's `out`, else runs/scale]."
        ),
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="Total environment steps (overrides the config).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, max=2**63 - 1, help="Seed (overrides the config).")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue from OUT/last.pt if it exists.")] = False,
    progress: ProgressOpt = True,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override one config field, FIELD=VALUE with a YAML value "
            "(e.g. --set critic_encoder=own --set 'validation_baselines=[eft, soft_eft]'); "
            "repeatable, applied after the config file.",
        ),
    ] = None,
) -> None:
    """Train a placement policy with PPO, or by expert iteration when the config says
    `algorithm: dagger`; best.pt is kept by validation at the training size."""
    from scalesched.train.config_file import algorithm_of, world_line
    from scalesched.train.ppo import Trainer, load_config, parse_overrides

    ppo_out = out or DEFAULT_TRAIN_OUT
    config = _training_config(config, preset, ppo_out)
    if algorithm_of(config) == "dagger":  # its config's own out unless --out is given
        from scalesched.commands.dagger import train_dagger

        train_dagger(config, out, seed=seed, overrides=set_ or [], steps=steps, resume=resume)
        return
    cfg = load_config(config, set_fields=parse_overrides(set_ or []), total_steps=steps, seed=seed)
    out = ppo_out
    if out.exists() and (out / "last.pt").exists() and not resume:
        raise InputError(str(out), "--out", "holds a run already; pass --resume or a new folder")
    worlds = sorted({x.residency or cfg.residency for x in cfg.settings} or {cfg.residency})
    where = world_line(worlds[0]) if len(worlds) == 1 else "by setting: " + ", ".join(worlds)
    err_console.print(f"world: {where}", markup=False, highlight=False)
    with progress_bar(progress, cfg.num_updates, f"training {cfg.name}", unit="updates") as tick:

        def on_update(update: int, total: int, row: dict[str, float]) -> None:
            tick(update, f"episode RT {row.get('mean_response_time_s', float('nan')):.1f} s")

        state = Trainer(cfg, out, resume=resume, progress=on_update if progress else None).train()
    validated = (
        f"best validation ratio to the best baseline {state.best_score:.3f}"
        if math.isfinite(state.best_score)
        else "no validation (validation_sizes is empty)"
    )
    kept = f", update-N.pt every {cfg.keep_every} updates" if cfg.keep_every else ""
    console.print(
        f"done: {state.global_step} steps, {state.episodes} episodes; {validated}; "
        f"checkpoints in {out}/best.pt and {out}/last.pt{kept}"
    )


DEFAULT_TRAIN_OUT = Path("runs/scale")
"""A PPO run's folder when ``--out`` is not given."""
TRAIN_PRESETS = Path(__file__).resolve().parent / "train" / "presets"
"""The shipped training configs, installed with the package (a source checkout's
configs/train links to them)."""


def train_presets() -> list[str]:
    """Names ``--preset`` takes: the YAML files of :data:`TRAIN_PRESETS`."""
    return sorted(f.stem for f in TRAIN_PRESETS.glob("*.yaml")) if TRAIN_PRESETS.is_dir() else []


def _training_config(config: Path | None, preset: str | None, out: Path) -> Path:
    """The config file ``train`` runs: --config, or --preset's shipped file. With neither,
    say what the defaults would do (a full-budget run) and ask for one instead of starting
    hours of training by accident."""
    from scalesched.train.ppo import PPOConfig

    if config is not None and preset is not None:
        raise InputError("--config/--preset", "config", "give one of them, not both")
    if config is not None:
        return config
    names = train_presets()
    known = ", ".join(names) if names else f"none found in {TRAIN_PRESETS}"
    if preset is not None:
        if preset not in names:
            raise InputError("--preset", "preset", f"unknown preset {preset!r}; known: {known}")
        return TRAIN_PRESETS / f"{preset}.yaml"
    d = PPOConfig()
    err_console.print(
        f"train without a config would run PPOConfig's defaults: {d.total_steps:,} "
        f"environment steps ({d.num_updates:,} updates, the full training budget) of a "
        f"{d.network} network on {d.cluster}, {d.workload}, into {out}. The shipped `scale` "
        "was trained with --preset scale-steady-prior-n16.",
        markup=False,
        highlight=False,
    )
    raise InputError(
        "train",
        "--config",
        f"give --config FILE or --preset NAME to start; presets: {known} "
        "(--steps N runs a shorter one)",
    )


DEFAULT_EVAL_POLICIES = (
    "scale,scale-nosrr,mlp-16,eft,heft_online,least_loaded,kv_aware,p2c,soft_eft,tail,fcfs_workflow"
)
"""The learned policies and every best-heuristic candidate (a test holds it to
``policies.BEST_HEURISTIC_CANDIDATES``; spelled out so that the CLI starts without importing
every policy), so the default study's "best heuristic" is the full definition's."""


EvalPoliciesOpt = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated scheduler names (with options as NAME:KEY=VALUE,..., e.g. "
        "rollout:horizon_s=10) or checkpoint paths [default: the learned policies and "
        "every best-heuristic candidate; with --suite, the suite's learned policies, the "
        "candidates always added]."
    ),
]
EvalSeedsOpt = Annotated[
    str | None,
    typer.Option(
        help="Number of seeds (0..K-1) or a comma list ('7,' is seed 7 alone) [default: 5]; "
        "with --suite, how "
        "many of the suite's evaluation seeds (the first K) [default: all]."
    ),
]
SuiteOpt = Annotated[
    str | None,
    typer.Option(
        help="Run a committed suite of settings instead (robustness, or a suite YAML "
        "file): each setting fixes its cluster, workload, arrivals, load and world, so "
        "--nodes, --clusters, --workload, --load, --arrivals and --residency do not "
        "apply (docs/robustness.md)."
    ),
]
SuiteSettingsOpt = Annotated[
    str | None,
    typer.Option(help="With --suite: comma-separated setting names to run [default: all]."),
]
SelectionOpt = Annotated[
    bool,
    typer.Option(
        "--selection",
        help="With --suite: run the suite's selection settings on its selection seeds, to "
        "choose a checkpoint or a margin on settings never evaluated (--seeds then counts "
        "selection seeds).",
    ),
]
NodesOpt = Annotated[str, typer.Option(help="Comma-separated cluster sizes N (hetero-N).")]
ClustersOpt = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated named clusters (presets or YAML files) to compare on "
        "instead of hetero-N; one per size, which replaces --nodes."
    ),
]


@app.command("eval")
@clean_errors
def evaluate(
    ctx: typer.Context,
    policies: EvalPoliciesOpt = None,
    nodes: NodesOpt = "16,32,48,64,96,128",
    clusters: ClustersOpt = None,
    seeds: EvalSeedsOpt = None,
    suite: SuiteOpt = None,
    settings: SuiteSettingsOpt = None,
    selection: SelectionOpt = False,
    workload: WorkloadOpt = "agentic-mix",
    load: Annotated[float, typer.Option(help="Arrival rate as a fraction of capacity.")] = 0.7,
    workflows: AutoWorkflowsOpt = "auto",
    precision: PrecisionOpt = 0.01,
    max_workflows: MaxWorkflowsOpt = None,
    residency: ResidencyOpt = "planned",
    arrivals: ArrivalsOpt = "poisson",
    out: Annotated[Path, typer.Option(help="Folder for results.csv, summary and plots.")] = Path(
        "results/study"
    ),
    slo: Annotated[
        float | None,
        typer.Option(
            help="Also find each policy's max load at this SLO: the highest load at which "
            "the p99 of response time / lower bound stays at or below SLO (slo.csv)."
        ),
    ] = None,
    jobs: Annotated[int | None, typer.Option(help="Worker processes (default: all cores).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    force: ForceOpt = False,
    progress: ProgressOpt = True,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Spread the runs over the Ray cluster at this address."),
    ] = None,
    ray_local: Annotated[
        bool, typer.Option(help="Spread the runs over a Ray instance started on this machine.")
    ] = False,
    deployment: DeploymentOpt = None,
    kv_policy: KvPolicyOpt = "off",
    tool_repeat: ToolRepeatOpt = 0.0,
    tool_cache: ToolCacheOpt = "off",
    logits_cache: LogitsCacheOpt = "off",
) -> None:
    """Compare policies across cluster sizes and seeds on identical workloads, or on the
    settings of a suite (--suite)."""
    from scalesched.eval.study import StudyConfig, seeds_from
    from scalesched.policies.options import split_policy_list
    from scalesched.runs.length import parse_workflows
    from scalesched.runs.world import check_residency
    from scalesched.workload.repeats import check_repeat_probability

    if suite is not None:
        _suite_refuses(ctx)
        _suite(suite, settings, policies, seeds, out, jobs, as_json, force, precision,
               max_workflows, selection)  # fmt: skip
        return
    _suite_only(settings=settings, selection=selection or None)
    sizes, names = _study_clusters(nodes, clusters, deployment)
    cfg = StudyConfig(
        policies=split_policy_list(policies or DEFAULT_EVAL_POLICIES),
        nodes=sizes,
        clusters=names,
        seeds=seeds_from(seeds or "5"),
        workload=workload,
        load=load,
        workflows=parse_workflows(workflows),
        deployment=str(deployment) if deployment is not None else None,
        kv_policy=kv_policy_mode(kv_policy),
        tool_repeat=check_repeat_probability(tool_repeat),
        tool_cache=tool_cache_on(tool_cache),
        logits_cache=logits_cache_mode(logits_cache),
        arrivals=arrivals,
        residency=check_residency(residency),
    )
    if slo is not None and not (math.isfinite(slo) and slo >= 1):
        raise InputError("--slo", "slo", "must be a finite multiple >= 1 of the lower bound")
    executor = "ray" if ray_address or ray_local else "process"
    title = "scalesched evaluation"
    _study(cfg, out, jobs, as_json, progress, title, executor, ray_address, slo, force,
           precision=precision, max_workflows=max_workflows)  # fmt: skip


def _suite_only(**given: object) -> None:
    """The options that name a suite's settings, refused without ``--suite``."""
    for key, value in given.items():
        if value is not None:
            raise InputError("--" + key, key, "names settings of a suite: give --suite")


SUITE_FIXES = {
    "nodes": "its settings name their clusters",
    "clusters": "its settings name their clusters",
    "deployment": "its settings name their worlds",
    "residency": "its settings name their worlds",
    "workload": "its settings name their workloads",
    "load": "its settings name their loads",
    "arrivals": "its settings name their arrivals",
    "workflows": "its runs grow to --precision, at most --max-workflows",
    "slo": "a suite compares mean and p99 ratios, not loads at an SLO",
    "ray_address": "a suite runs on this machine (--jobs)",
    "ray_local": "a suite runs on this machine (--jobs)",
    "kv_policy": "its settings run without caches",
    "tool_repeat": "its settings run without caches",
    "tool_cache": "its settings run without caches",
    "logits_cache": "its settings run without caches",
}
"""The ``eval`` options a suite's settings fix, each with why: given with ``--suite`` they
are refused, not silently ignored."""


def _suite_refuses(ctx: typer.Context) -> None:
    """Refuse, by its flag, the first option given (on the command line or from the
    environment) that the suite's settings fix."""
    for key, why in SUITE_FIXES.items():
        source = ctx.get_parameter_source(key)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            flag = key.replace("_", "-")
            raise InputError("--" + flag, flag, f"not with --suite: {why}")


def _suite(
    name: str,
    settings: str | None,
    policies: str | None,
    seeds: str | None,
    out: Path,
    jobs: int | None,
    as_json: bool,
    force: bool,
    precision: float,
    max_workflows: int | None,
    selection: bool = False,
) -> None:
    """``eval --suite``: each chosen setting of the suite in turn (``eval.robustness``): its
    evaluation settings on its evaluation seeds, or with ``selection`` its selection
    settings on its selection seeds."""
    from scalesched.eval.robustness import run_suite
    from scalesched.eval.study import check_policies
    from scalesched.eval.suite import load_suite
    from scalesched.policies.options import split_policy_list
    from scalesched.runs.length import check_precision
    from scalesched.sim.scenario import MAX_WORKFLOWS

    loaded = load_suite(name)
    which = "selection" if selection else "evaluation"
    chosen = loaded.pick(settings, which)
    asked = split_policy_list(policies) if policies else loaded.policies
    check_policies(asked)
    check_precision(precision)
    if max_workflows is not None and not 1 <= max_workflows <= MAX_WORKFLOWS:
        raise InputError(
            "--max-workflows",
            "max_workflows",
            f"must be in [1, {MAX_WORKFLOWS}], got {max_workflows}",
        )
    if jobs is not None and not 1 <= jobs <= 1024:
        raise InputError("--jobs", "jobs", f"must be in [1, 1024], got {jobs}")
    all_seeds = loaded.selection_seeds if selection else loaded.evaluation_seeds
    if seeds is not None and not (seeds.isdigit() and 1 <= int(seeds) <= len(all_seeds)):
        raise InputError(
            "--seeds", "seeds", f"with --suite, a count from 1 to {len(all_seeds)} (the first K "
            f"of the suite's {which} seeds {', '.join(map(str, all_seeds))}), got {seeds!r}"
        )  # fmt: skip
    used = all_seeds[: int(seeds)] if seeds is not None else all_seeds
    summary = run_suite(
        loaded, chosen, asked, used, out, jobs=jobs, precision=precision,
        max_workflows=max_workflows, force=force,
        say=lambda line: err_console.print(line, markup=False, highlight=False),
    )  # fmt: skip
    if as_json:
        print_json({k: v for k, v in summary.items() if k != "markdown"})
        return
    print_markdown(summary["markdown"])
    console.print(f"results: {out}/robustness.md, {out}/robustness.json, {out}/<setting>/")


def _study_clusters(
    nodes: str, clusters: str | None, deployment: Path | None
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The sizes an evaluation compares and, where named clusters replace hetero-N, their
    names: one deployment names one cluster, so it takes exactly one size."""
    from scalesched.eval.study import named_clusters, parse_int_list

    sizes = parse_int_list(nodes, "--nodes")
    names: tuple[str, ...] = ()
    if clusters is not None:
        sizes, names = named_clusters([c.strip() for c in clusters.split(",") if c.strip()])
        if not sizes:
            raise InputError("--clusters", "clusters", "give at least one cluster")
    if deployment is not None and len(sizes) != 1:
        raise InputError("--deployment", "nodes", "a deployment names one cluster: one --nodes")
    return sizes, names


def _study(
    cfg: Any,
    out: Path,
    jobs: int | None,
    as_json: bool,
    progress: bool,
    title: str,
    executor: str = "process",
    ray_address: str | None = None,
    slo: float | None = None,
    force: bool = False,
    *,
    precision: float = 0.01,
    max_workflows: int | None = None,
) -> None:
    from scalesched.eval.pipeline import run_and_report
    from scalesched.runs.length import check_precision
    from scalesched.sim.scenario import MAX_WORKFLOWS, check_arrivals

    check_precision(precision)
    for value in (cfg.workflows, max_workflows):
        if value is not None and not 1 <= value <= MAX_WORKFLOWS:
            raise InputError(
                "--workflows", "workflows", f"must be in [1, {MAX_WORKFLOWS}], got {value}"
            )
    if not (math.isfinite(cfg.load) and cfg.load > 0):
        raise InputError("--load", "load", f"must be a positive finite number, got {cfg.load}")
    check_arrivals(cfg.arrivals, cfg.workflows or 2)
    if jobs is not None and not 1 <= jobs <= 1024:
        raise InputError("--jobs", "jobs", f"must be in [1, 1024], got {jobs}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("--out", "out", f"cannot create {out}: {exc.strerror}") from None
    total = len(cfg.policies) * len(cfg.nodes) * len(cfg.seeds)
    with progress_bar(progress and not as_json, total, "simulated runs") as tick:
        summary = run_and_report(
            cfg,
            out,
            jobs=jobs,
            on_done=lambda done, _t: tick(done),
            title=title,
            executor=executor,
            ray_address=ray_address,
            slo=slo,
            force=force,
            precision=precision,
            max_workflows=max_workflows,
            say=lambda line: err_console.print(line, markup=False, highlight=False),
        )
    if as_json:
        print_json(summary)
        return
    text = (out / "summary.md").read_text()
    line = summary.get("verdict")
    if line:  # printed last, once
        text = text.replace(f"\n{line}\n", "")
    print_markdown(text)
    console.print(f"results: {out}/results.csv; plots: {', '.join(summary['plots'])}")
    if line:
        console.print(line, markup=False, highlight=False)


DEMO_SIZES = (16, 32, 48)
"""The training size and the two the paper claims zero-shot transfer to."""
DEMO_LEARNED = ("scale-safe", "mlp-16")
"""The learned policy the README recommends (a SCALE network trained across the robustness
suite's settings, bounded by ``tail``'s margin) and the fixed-size baseline that cannot run
past N = 16 (two cheap runs that show why SCALE's size-free network matters). The other
shipped networks are left to ``eval`` (docs/reproduction.md): each adds six neural runs,
the demo's slowest kind (a third of its time each)."""
DEMO_MAX_WORKFLOWS = 16_000
"""The demo's longest run under ``--workflows auto``: 2000, then the length whose window
spans 16 mean responses at N = 48 (``runs.length.MIN_SPAN_RESPONSES``), at most this. On
planned deployments load 0.7 is 12-46 workflows/s at N = 16-48, so 4000 workflows span
three responses at N = 48, too few for a verdict; 16,000 span about 13. The main job must
still end in tens of minutes on two cores (60 runs a length); its summary says whether
the precision was reached."""


@app.command()
@clean_errors
def demo(
    out: Annotated[Path, typer.Option(help="Folder for the results and plots.")] = Path(
        "results/demo"
    ),
    seeds: Annotated[str, typer.Option(help="Number of seeds or a comma list.")] = "2",
    workflows: AutoWorkflowsOpt = "auto",
    precision: PrecisionOpt = 0.01,
    max_workflows: MaxWorkflowsOpt = DEMO_MAX_WORKFLOWS,
    residency: ResidencyOpt = "planned",
    jobs: Annotated[int | None, typer.Option(help="Worker processes.")] = None,
    progress: ProgressOpt = True,
    force: ForceOpt = False,
) -> None:
    """The main job: the shipped SCALE policy (and the fixed-size MLP at N = 16) against
    every best-heuristic candidate at N = 16, 32, 48, at steady state (load 0.7 of measured
    capacity), ending with a one-line verdict."""
    from scalesched.eval.study import StudyConfig, seeds_from
    from scalesched.runs.length import parse_workflows
    from scalesched.runs.world import check_residency

    cfg = StudyConfig(
        policies=demo_policies(),
        nodes=DEMO_SIZES,
        seeds=seeds_from(seeds),
        workflows=parse_workflows(workflows),
        residency=check_residency(residency),
    )
    _study(
        cfg,
        out,
        jobs,
        False,
        progress,
        "scalesched demo",
        force=force,
        precision=precision,
        max_workflows=max_workflows,
    )


def demo_policies() -> tuple[str, ...]:
    """What ``demo`` compares: the shipped learned policies of :data:`DEMO_LEARNED`, then
    every best-heuristic candidate, so its verdict is against the full definition."""
    from scalesched.policies import BEST_HEURISTIC_CANDIDATES
    from scalesched.policies.trained import shipped_policies

    shipped = shipped_policies()
    return (*[p for p in DEMO_LEARNED if p in shipped], *BEST_HEURISTIC_CANDIDATES)


@app.command("static")
@clean_errors
def static_cmd(
    workflow: Annotated[
        str, typer.Option(help="WfFormat JSON file or wfcommons:RECIPE:TASKS[:SEED].")
    ],
    network: Annotated[
        Path, typer.Option(help="Network file (YAML or JSON): node speeds, link bandwidths.")
    ],
    policy: Annotated[
        str, typer.Option(help="heft, cpop, eft (or any scheduler name) or a checkpoint path.")
    ] = "heft",
    seed: SeedOpt = 0,
    gantt: Annotated[Path | None, typer.Option(help="Write a Gantt chart PNG here.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a line.")
    ] = False,
) -> None:
    """Schedule one workflow on a fixed network (no arrivals) and print the makespan."""
    from scalesched.static import (
        build_problem,
        load_network,
        load_task_graph,
        lower_bound_problem,
        schedule_problem,
    )
    from scalesched.static.plot import plot_schedule

    if gantt is not None:
        check_output_path(gantt, "--gantt", "image")
    graph = load_task_graph(workflow, seed=seed)
    net = load_network(network)
    prob = build_problem(graph, net)
    schedule = schedule_problem(prob, policy, seed=seed)
    bound = lower_bound_problem(prob)
    if gantt is not None:
        plot_schedule(schedule, prob.nodes, gantt, title=f"{policy} on {network.name}, {workflow}")
        announce(f"Gantt chart written to {gantt}")
    row: dict[str, Any] = {
        "policy": policy,
        "workflow": workflow,
        "network": str(network),
        "tasks": prob.n_tasks,
        "nodes": prob.n_nodes,
        "makespan_s": schedule.makespan,
        "lower_bound_s": bound,
        **{k: v for k, v in schedule.info.items() if k in ("sim_makespan", "bandwidth_exact")},
    }
    if as_json:
        print_json(row)
        return
    typer.echo(static_line(policy, schedule.makespan, bound, prob))


def static_line(policy: str, makespan: float, bound: float, prob: Any) -> str:
    """The human line of ``static``: the makespan against the lower bound, labelled. The
    bound is the critical path on the fastest node with free transfers, so it ignores that
    every task shares a few nodes; the line gives the work bound beside it (all the work on
    every node at once, at full speed) so that a ratio of 70 on a wide DAG reads as what it
    is (a loose bound), not as a bad schedule."""
    ratio = makespan / bound if bound > 0 else float("nan")
    work = math.fsum(prob.cost) / math.fsum(prob.speed)
    return (
        f"{policy}: makespan {makespan:.6g} s for {prob.n_tasks} tasks on {prob.n_nodes} "
        f"nodes; ratio to the critical-path lower bound {ratio:.3f} (bound {bound:.6g} s: the "
        f"longest chain on the fastest node, transfers free; it ignores that the tasks share "
        f"{prob.n_nodes} nodes, whose total work alone takes {work:.6g} s)"
    )


@app.command()
@clean_errors
def run(
    cluster: ClusterOpt = "hetero-8",
    workload: WorkloadOpt = "agentic-mix",
    policy: PolicyOpt = "eft",
    residency: ResidencyOpt = "planned",
    workflows: WorkflowsOpt = 50,
    load: LoadOpt = 0.7,
    rate: RateOpt = None,
    arrivals: ArrivalsOpt = "poisson",
    seed: SeedOpt = 0,
    local: ray_run.LocalOpt = False,
    address: ray_run.AddressOpt = None,
    connect_timeout: ray_run.ConnectTimeoutOpt = 30.0,
    time_scale: ray_run.TimeScaleOpt = 0.05,
    max_retries: ray_run.MaxRetriesOpt = 2,
    llm: ray_run.LlmOpt = "emulated",
    endpoints: ray_run.EndpointsOpt = None,
    fail_rate: ray_run.FailRateOpt = 0.0,
    compare: ray_run.CompareOpt = False,
    object_store_mb: ray_run.ObjectStoreOpt = 80,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object of metrics instead of a table.")
    ] = False,
    trace: TraceOpt = None,
    gantt: GanttOpt = None,
    deployment: DeploymentOpt = None,
) -> None:
    """Run a workload on a Ray cluster, every task placed by the policy (docs/runtime.md),
    on a deployment planned for the offered rate unless --residency dynamic or --deployment."""
    from scalesched.runs.setup import Scenario, prepare
    from scalesched.runs.world import check_residency

    options = ray_run.RayOptions(
        local=local,
        address=address,
        connect_timeout=connect_timeout,
        time_scale=time_scale,
        max_retries=max_retries,
        llm=llm,
        endpoints=endpoints,
        fail_rate=fail_rate,
        object_store_mb=object_store_mb,
    )
    ray_run.check_ray_options(options)
    check_outputs(trace, gantt)
    served = ray_run.served_endpoints(options)
    spec, scheduler = cluster_and_policy(cluster, policy)
    scenario = Scenario(
        workload=workload,
        workflows=workflows,
        load=load,
        rate=rate,
        arrivals=arrivals,
        seed=seed,
        residency=check_residency(residency),
    )
    setup = prepare(spec, scenario, deployment=deployment)
    config = ray_run.runtime_config(options, setup, served, seed)
    result = ray_run.run_on_ray(options, setup, scheduler, config, seed, quiet=as_json)
    metrics = ray_run.ray_run_metrics(result, setup, policy, seed, compare)
    metrics.update(setup.world.metrics())
    chart_title = f"{policy} on {spec.name} (Ray), {workload}, seed {seed}"
    write_run_outputs(result, trace, gantt, chart_title, trace_written=False)
    title = f"{policy} on {spec.name} via Ray ({len(spec)} nodes), seed {seed}"
    ray_run.report_ray_run(metrics, result, title, as_json)


from scalesched.memplan.cli import memplan_app  # noqa: E402  (registered last)

app.add_typer(memplan_app, name="memplan")


from scalesched.commands.plan import plan_app  # noqa: E402  (a sub-app, registered last)

app.add_typer(plan_app, name="plan")

from scalesched.commands.predict import predict_app  # noqa: E402  (a sub-app, registered last)

app.add_typer(predict_app, name="predict")

from scalesched.commands.headroom import register as _register_headroom  # noqa: E402

_register_headroom(app)

from scalesched.serve.cli import register as _register_serve  # noqa: E402  (engine, fleet, serve, loadgen)


def _serve_policy(name: str) -> Any:
    from scalesched.policies import get_policy

    return get_policy(name)


def _serve_jobs(tables: Any, scenario: Any) -> list[Any]:
    from scalesched.runs.setup import build_jobs

    return build_jobs(tables, scenario)


def _fleet_world(
    spec: Any, workload: str, rate: float | None, load: float
) -> tuple[float | None, Any, dict[str, str]]:
    """The planned world of a fleet: as ``simulate``'s (``runs.world.resolve_world``)."""
    from scalesched.runs.world import resolve_world

    offered, deployment, world = resolve_world(spec, workload, "planned", rate=rate, load=load)
    return offered, deployment, world.metrics()


_register_serve(
    app,
    get_policy=_serve_policy,
    build_jobs=_serve_jobs,
    progress=progress_bar,
    plan_world=_fleet_world,
)


def main() -> None:  # pragma: no cover
    app()
