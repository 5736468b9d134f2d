"""``scalesched headroom``: how much could any scheduler still win on one setting? Each
policy's mean and p99 against the contention-free and the capacity-aware lower bounds, the
oracles' gain over the best heuristic, and each policy's gap split along its workflows'
critical paths (docs/headroom.md)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from scalesched.commands.common import (
    NARROW,
    ArrivalsOpt,
    KvPolicyOpt,
    ProgressOpt,
    ToolCacheOpt,
    ToolRepeatOpt,
    announce,
    progress_bar,
)
from scalesched.errors import InputError, check_output_path, clean_errors, print_json

_COLUMNS = (
    ("policy", "scheduler (* the best heuristic, (oracle) a clairvoyant row)"),
    ("mean s", "mean response time over the measured (steady-state window) workflows"),
    ("p99 s", "99th percentile of the same"),
    ("steady", "the run kept up with the arrivals (else its figures describe an overload)"),
    ("gap", "(mean - bound) / mean: the share a perfect scheduler could still win"),
    ("gap cf", "the same against the contention-free bound"),
)


_SHORT = {
    "slower_server": "slower",
    "admission_wait": "admit",
    "batching": "batch",
    "model_load": "load",
    "transfer": "xfer",
    "tool_queue": "toolq",
    "cache_miss": "cache",
    "path": "path",
}


def _decomposition_table(study: Any) -> Table:
    from scalesched.eval.headroom.decompose import COMPONENT_HELP, COMPONENTS

    table = Table(
        title="where each policy's mean - contention-free bound goes (s per workflow)",
        **NARROW,
    )
    table.add_column("policy", no_wrap=True)
    table.add_column("gap s", justify="right")
    for name in COMPONENTS:
        table.add_column(_SHORT[name], justify="right")
    for row in study.rows:
        d = row.decomposition
        parts = [f"{d.components[c]:.2f}" for c in COMPONENTS]
        table.add_row(row.name, f"{d.mean_response - d.mean_bound:.2f}", *parts)
    table.caption = "\n".join(f"{_SHORT[c]}: {h}" for c, h in COMPONENT_HELP.items())
    table.caption_justify = "left"
    return table


def _breakdown_table(study: Any, name: str) -> Table:
    """One policy's split per model (tool for tool tasks) and per server type."""
    from scalesched.eval.headroom.decompose import COMPONENTS

    row = study.row(name)
    table = Table(
        title=f"{name}: the split per model and per server type (s per workflow)", **NARROW
    )
    table.add_column("model / server type", no_wrap=True)
    parts = [c for c in COMPONENTS if c != "path"]
    for c in parts:
        table.add_column(_SHORT[c], justify="right")
    d = row.decomposition
    for group in (d.by_model, d.by_server_type):
        for key, split in group.items():
            table.add_row(key, *(f"{split[c]:.2f}" for c in parts))
    return table


def _main_table(study: Any) -> Table:
    s = study.setting
    from scalesched.eval.headroom.study import offered_label

    offered = offered_label(s)
    if s["arrivals"] != "poisson":
        offered += f", {s['arrivals']} arrivals"
    if s["kv_policy"] is not None:
        offered += f", KV {s['kv_policy']}"
    if s["tool_cache"]:
        offered += f", tool cache (repeat {s['tool_repeat']})"
    table = Table(
        title=f"headroom on {s['cluster']}, {s['workload']}, {offered}, seed {s['seed']} "
        f"({s['measured_workflows']} of {s['workflows']} workflows measured)"
    )
    for name, _ in _COLUMNS:
        table.add_column(name, justify="left" if name == "policy" else "right")
    for row in study.rows:
        label = row.name + (" *" if row.name == study.best_heuristic else "")
        label += f" (oracle over {row.base})" if row.base else " (oracle)" if row.oracle else ""
        table.add_row(
            label,
            f"{row.mean_s:.2f}",
            f"{row.p99_s:.2f}",
            "yes" if row.steady else "NO",
            f"{row.gap(study.bound_s):.1%}",
            f"{row.gap(study.lower_bound_s):.1%}",
        )
    cap = study.capacity
    cap_text = f"{cap.mean_s:.2f} s" if cap.mean_s is not None else f"none ({cap.status})"
    lines = [
        f"contention-free bound {study.lower_bound_s:.2f} s; capacity-aware bound {cap_text}; "
        f"any-deployment bound {study.any_deployment_bound_s:.2f} s",
        *(f"{name}: {doc}" for name, doc in _COLUMNS),
    ]
    for row in study.rows:
        if row.oracle:
            fig = study.oracle_figures(row)
            gain, share = fig["gain_over_best"], fig["headroom_captured"]
            if gain is not None:
                captured = f", {share:.0%} of its headroom captured" if share is not None else ""
                lines.append(f"{row.name}: {gain:.1%} below {study.best_heuristic}{captured}")
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def _split_table(study: Any) -> Table:
    """Deployment, placement and ordering (docs/headroom.md), s per measured workflow."""
    sp = study.split
    b = sp.bounds
    table = Table(
        title="how much is deployment, placement, ordering (s per workflow, same workflows)",
        **NARROW,
    )
    for name in ("part", "what", "s", "95% CI"):
        table.add_column(name, justify="left" if name in ("part", "what") else "right")
    ladder = sp.ladder()
    if ladder is not None:
        g = sp.planning_gain
        steady = "" if sp.dynamic_steady.get(sp.dynamic_best, True) else " (NOT steady)"
        table.add_row(
            "planning",
            f"{sp.dynamic_best} on dynamic residency{steady} - {sp.best} here",
            f"{ladder['planning_gain_s']:.2f}",
            f"±{g.ci_s:.2f}",
        )
    table.add_row(
        "deployment",
        "this deployment's configurations: its contention-free bound - any deployment's",
        f"{b.deployment_contention_free_s - b.any_deployment_s:.2f}",
        "",
    )
    table.add_row(
        "deployment",
        "its capacity at this rate: its capacity-aware bound - its contention-free one",
        f"{b.deployment_s - b.deployment_contention_free_s:.2f}",
        "",
    )
    table.add_row(
        "deployment",
        "less what capacity costs every allocation: best-allocation bound - any deployment's",
        f"{b.any_deployment_s - b.best_allocation_s:.2f}",
        "",
    )
    for name, mean in sp.means.items():
        label = (
            name + (" *" if name == sp.best else "") + (" (oracle)" if name in sp.oracle else "")
        )
        table.add_row(
            "placement", f"{label} - this deployment's bound", f"{mean - b.deployment_s:.2f}", ""
        )
    for _rule, change, _, _ in sp.ordering:
        table.add_row(
            "ordering", f"{change.a} - {change.b}", f"{change.diff_s:+.2f}", f"±{change.ci_s:.2f}"
        )
    alloc = study.allocation
    over = (
        f"capacity-aware over allocations {alloc.mean_s:.2f}"
        if alloc is not None and alloc.mean_s is not None
        else f"none over allocations ({alloc.status if alloc is not None else 'not computed'})"
    )
    table.caption = (
        f"bounds: best allocation {b.best_allocation_s:.2f} s ({over}; any deployment "
        f"{b.any_deployment_s:.2f}), this deployment {b.deployment_s:.2f} s (contention-free "
        f"{b.deployment_contention_free_s:.2f}); "
        "each policy's mean - best allocation = deployment (its three lines) + placement"
    )
    table.caption_justify = "left"
    return table


@contextmanager
def _progress(show: bool, total: int) -> Iterator[Callable[[str], Callable[[int], None]]]:
    """One progress series per run (completed workflows), through the commands' shared
    helper: a bar on a terminal, plain lines elsewhere, nothing when hidden."""
    helper = progress_bar(show, total, "", unit="workflows")
    with helper:
        yield helper.series


def _check_names(names: list[str], option: str) -> None:
    from scalesched.policies import get_policy

    for name in names:
        try:
            get_policy(name)
        except InputError as exc:  # the registry names --policy: say which option it was
            raise InputError(option, option.lstrip("-"), exc.message) from None


PolicyListOpt = Annotated[
    list[str] | None,
    typer.Option(help="Policy to measure (repeat it) [default: the best-heuristic set]."),
]
NoOracleOpt = Annotated[
    bool, typer.Option("--no-oracle", help="Skip the oracle rows (they are slow).")
]
PlotOpt = Annotated[Path | None, typer.Option(help="Write the stacked-bar chart here (e.g. .png).")]
WorkflowsOpt = Annotated[
    str,
    typer.Option(
        help="Workflows per run, or 'auto': grow the policies' runs (doubling from "
        "max(2000, 16 x servers)) until the best heuristic's mean is within --precision, "
        "then run the oracles at that length."
    ),
]
PrecisionOpt = Annotated[
    float, typer.Option(help="With --workflows auto: the 95% CI half-width to reach.")
]
MaxWorkflowsOpt = Annotated[
    int | None, typer.Option(help="With --workflows auto: the longest run tried.")
]
OracleOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Oracle policy rows (repeat it) [default: rollout_oracle, which "
        "rolls out over the best heuristic measured beside it]."
    ),
]
BoundTimeLimitOpt = Annotated[
    float,
    typer.Option(
        help="Wall seconds each capacity-aware bound's linear program may take (this "
        "deployment's, and with the split the one over allocations); past it the study "
        "reports no such bound (the contention-free one stands)."
    ),
]
BoundSampleOpt = Annotated[
    int,
    typer.Option(
        help="Workflows each capacity-aware bound is priced on when the window holds more "
        "(its Lagrangian form, a bound on the program's value: seconds instead of "
        "minutes, at most 0.2% below it where measured; docs/headroom-split.md); 0: solve "
        "the whole program."
    ),
]
SplitOpt = Annotated[
    bool,
    typer.Option(
        "--split/--no-split",
        help="Split each gap into deployment, placement and ordering: runs the ordering "
        "rules over the best heuristic's router and, on a deployment, the policies on "
        "dynamic residency with the same jobs (docs/headroom.md).",
    ),
]
DynamicPolicyOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="With --split on a deployment: a policy to run on dynamic residency with the "
        "same jobs (repeat it) [default: the best heuristic here, and tail]."
    ),
]
ResidencyOpt = Annotated[
    str,
    typer.Option(
        help="planned (a deployment planned for the offered rate, --load a fraction of that "
        "world's capacity) or dynamic (models loaded on demand)."
    ),
]


def headroom(
    cluster: Annotated[str, typer.Option(help="Cluster preset or YAML file.")] = "hetero-16",
    workload: Annotated[str, typer.Option(help="Workload preset or WfFormat JSON.")] = (
        "agentic-mix"
    ),
    load: Annotated[
        float, typer.Option(help="Arrival rate as a fraction of the measured capacity.")
    ] = 0.9,
    rate: Annotated[
        float | None, typer.Option(help="Arrival rate in workflows/s (overrides --load).")
    ] = None,
    policy: PolicyListOpt = None,
    oracle: OracleOpt = None,
    no_oracle: NoOracleOpt = False,
    workflows: WorkflowsOpt = "auto",
    precision: PrecisionOpt = 0.02,
    max_workflows: MaxWorkflowsOpt = 8000,
    residency: ResidencyOpt = "planned",
    arrivals: ArrivalsOpt = "poisson",
    kv_policy: KvPolicyOpt = "off",
    tool_repeat: ToolRepeatOpt = 0.0,
    tool_cache: ToolCacheOpt = "off",
    bound_time_limit: BoundTimeLimitOpt = 600.0,  # bound.BOUND_TIME_LIMIT_S (scipy is slow)
    bound_sample: BoundSampleOpt = 100,  # lagrange.SAMPLE_WORKFLOWS
    split: SplitOpt = True,
    dynamic_policy: DynamicPolicyOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of every random choice.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    plot: PlotOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """How much could any scheduler still win? Policies and oracles against two lower
    bounds, with each policy's gap split along its critical paths."""
    from scalesched.commands.simulate import cache_modes, show_progress
    from scalesched.eval.headroom import Caches, measure_headroom
    from scalesched.runs.length import check_precision, check_steady_arrivals, parse_workflows
    from scalesched.runs.setup import Scenario, prepare
    from scalesched.runs.world import check_residency

    if plot is not None:
        check_output_path(plot, "--plot", "image")
    policies, oracles, dynamic_policies = _row_names(policy, oracle, no_oracle, dynamic_policy)
    modes = cache_modes(kv_policy, tool_cache, "off", tool_repeat)  # simulate's checks
    caches = Caches(kv_policy=modes.kv, tool_cache=modes.tool_cache)
    scenario = Scenario(
        workload=workload,
        load=load,
        rate=rate,
        arrivals=arrivals,
        seed=seed,
        tool_repeat=tool_repeat,
        residency=check_residency(residency),
    )
    count = parse_workflows(workflows)
    check_precision(precision)
    show = show_progress(progress, as_json)

    def study_at(n: int, oracle_rows: list[str], final: bool = True) -> Any:
        setup = prepare(cluster, dataclasses.replace(scenario, workflows=n), stream=False)
        if setup.world.note:
            announce(f"note: {setup.world.note}")
        with _progress(show, len(setup.jobs)) as bar:
            return measure_headroom(
                setup,
                policies,
                oracle_rows,
                progress=bar,
                caches=caches,
                bound_time_limit_s=bound_time_limit,
                split=split and final,
                dynamic_policies=dynamic_policies,
                bound_sample=bound_sample,
            )

    if count is None:
        check_steady_arrivals(arrivals)
        count = _auto_length(study_at, cluster, precision, max_workflows)
    study = study_at(count, oracles)
    _report(study, as_json, plot)


def _row_names(
    policy: list[str] | None,
    oracle: list[str] | None,
    no_oracle: bool,
    dynamic_policy: list[str] | None,
) -> tuple[list[str], list[str], list[str] | None]:
    """The policy, oracle and dynamic-residency rows asked for (defaults filled in), each
    name checked against the registry."""
    from scalesched.eval.headroom import DEFAULT_ORACLES
    from scalesched.policies import BEST_HEURISTIC_CANDIDATES

    policies = list(policy) if policy else list(BEST_HEURISTIC_CANDIDATES)
    oracles = [] if no_oracle else list(oracle) if oracle else list(DEFAULT_ORACLES)
    dynamic = list(dynamic_policy) if dynamic_policy else None
    _check_names(policies, "--policy")
    _check_names(oracles, "--oracle")
    _check_names(dynamic or [], "--dynamic-policy")
    return policies, oracles, dynamic


def _auto_length(
    study_at: Callable[[int, list[str], bool], Any], cluster: str, precision: float, cap: int | None
) -> int:
    """``--workflows auto``: the first length at which the best heuristic's mean (on the
    policies' shared window) is steady and within ``precision``; the oracles are not run
    until then (they cost a hundred times a policy)."""
    from scalesched.cluster import get_cluster
    from scalesched.runs.length import Attempt, grow

    def attempt(n: int) -> Attempt:
        study = study_at(n, [], False)
        best = next((r for r in study.rows if r.name == study.best_heuristic), None)
        if best is None:
            return Attempt(n, math.nan, math.inf, False)
        return Attempt(n, best.mean_s, best.mean_ci_s, best.steady)

    final, _ = grow(attempt, len(get_cluster(cluster)), precision, cap=cap, say=announce)
    return final.workflows


def _report(study: Any, as_json: bool, plot: Path | None) -> None:
    """The chart (when asked), then the JSON object or the three tables and the notes."""
    if plot is not None:
        from scalesched.eval.headroom.plot import plot_headroom

        plot_headroom(study, plot)
        announce(f"headroom chart written to {plot}")
    if as_json:
        print_json(study.as_json())
        return
    console = Console()
    console.print(_main_table(study))
    if study.split is not None:
        console.print(_split_table(study))
    console.print(_decomposition_table(study))
    if study.best_heuristic is not None:
        console.print(_breakdown_table(study, study.best_heuristic))
    for note in study.notes:
        Console(stderr=True).print(f"note: {note}")


def register(app: typer.Typer) -> None:
    """Add ``headroom`` to the ``scalesched`` command."""
    app.command("headroom")(clean_errors(headroom))
