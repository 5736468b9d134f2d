"""``scalesched plan``: plan a pinned deployment for a workload and a rate, and ``plan
shares``: the per-LLM time shares the planner rests on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from scalesched.errors import InputError, prepare_output_path, print_json
from scalesched.serve.fleet import FLEET_HOST, FLEET_PORT

plan_app = typer.Typer(
    help="Plan GPU allocations for multi-LLM workflows (Scepsy-style; docs/planning.md).",
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


_OVERLOADED = "the plan cannot keep up with --rate: a queue grows without bound"
NULL_REASONS = {
    "predicted_throughput_wps": _OVERLOADED,
    "predicted_mean_response_s": _OVERLOADED,
    "predicted_p95_response_s": _OVERLOADED,
}
"""Why a ``--json`` prediction is ``null`` (see :func:`scalesched.errors.json_safe`)."""


def plan_summary(result: Any, slo_p95: float | None, out: Path | None) -> dict[str, Any]:
    """The JSON object of ``plan --json``."""
    pred = result.prediction
    return {
        "strategy": result.strategy,
        "rate_wps": result.rate_wps,
        "predicted_throughput_wps": pred.throughput_wps,
        "predicted_mean_response_s": pred.mean_s,
        "predicted_p95_response_s": pred.p95_s,
        "meets_slo": None if slo_p95 is None else bool(pred.p95_s <= slo_p95),
        "gpus_used": result.gpus_used,
        "planning_time_s": result.planning_time_s,
        "replicas": [
            {"model": r.model, "server": r.server, "gpus": list(r.gpus), "share": r.share}
            for r in result.replicas
        ],
        "allocation": {
            m: {str(c): n for c, n in sorted(counts.items())}
            for m, counts in result.allocation.items()
        },
        "notes": result.notes,
        "out": str(out) if out is not None else None,
    }


def _short(value: Any, unit: str = "") -> str:
    """A figure for a file's comment line: 4 significant digits (the prediction is not
    known to 16), and an overload as words rather than ``inf``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "unbounded (overloaded)"
    return f"{value:.4g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _write_plan(result: Any, spec: Any, out: Path, summary: dict[str, Any]) -> None:
    from scalesched.cluster.deployment import deployment_from_dict, deployment_to_dict

    name = f"{result.strategy}-{spec.name}-{result.rate_wps:g}wps"
    data = deployment_to_dict(name, spec.name, result.replicas)
    deployment_from_dict(data, spec, str(out))  # what we write must load back
    head = (
        f"# scalesched plan ({result.strategy}) at {result.rate_wps:g} workflows/s: predicted "
        f"throughput {_short(summary['predicted_throughput_wps'])} workflows/s, mean "
        f"{_short(summary['predicted_mean_response_s'], ' s')}, p95 "
        f"{_short(summary['predicted_p95_response_s'], ' s')}, {result.gpus_used:g} GPUs\n"
    )
    try:
        out.write_text(head + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise InputError(str(out), "--out", f"cannot write: {exc}") from None


@plan_app.callback(invoke_without_command=True)
def plan(
    ctx: typer.Context,
    cluster: Annotated[
        str, typer.Option(help="Cluster preset (hetero-N, homogeneous-N[:TYPE]) or YAML file.")
    ] = "hetero-16",
    workload: Annotated[
        str, typer.Option(help="Workload preset (see `scalesched workloads`) or WfFormat JSON.")
    ] = "agentic-mix",
    rate: Annotated[
        float | None, typer.Option(help="Target arrival rate, workflows/s (required).")
    ] = None,
    slo_p95: Annotated[
        float | None,
        typer.Option(help="p95 response objective, s: the output says whether the plan meets it."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write the plan as a deployment YAML here, e.g. results/plan.yaml."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Write a baseline instead: independent (GPUs split by call count) or uniform."
        ),
    ] = None,
    samples: Annotated[
        int, typer.Option(help="Sample workflows the predictor is built from.")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the sample workflows.")] = 20261,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    backends_out: Annotated[
        Path | None,
        typer.Option(
            help="Also write the gateway's backends file for the fleet that serves this plan "
            "(`fleet --deployment OUT --host H --port P`): the URLs it will listen on."
        ),
    ] = None,
    fleet_host: Annotated[
        str, typer.Option(help="With --backends-out: the address the fleet listens on.")
    ] = FLEET_HOST,
    fleet_port: Annotated[
        int, typer.Option(help="With --backends-out: the fleet's first port (one per server).")
    ] = FLEET_PORT,
) -> None:
    """Search GPU share x tp x replicas for the lowest predicted latency at --rate, place
    it (tp groups in one server, best fit, spread), and write it as a deployment file."""
    if ctx.invoked_subcommand is not None:
        return
    fleet = FleetAddress(backends_out, fleet_host, fleet_port)
    _plan(cluster, workload, rate, slo_p95, out, baseline, samples, seed, as_json, fleet)


@dataclass(frozen=True)
class FleetAddress:
    """Where ``--backends-out`` goes and where the fleet serving the plan listens."""

    backends_out: Path | None
    host: str
    port: int


def _write_backends(result: Any, spec: Any, fleet: FleetAddress) -> None:
    """The backends file of the fleet that serves ``result``'s replicas (``fleet
    --deployment``), its URLs by the fleet's port convention (``serve.fleet``)."""
    from scalesched.cluster.deployment import deployment_from_dict, deployment_to_dict
    from scalesched.cluster.endpoints import port_problem
    from scalesched.serve.fleet import fleet_backends_yaml, fleet_servers

    assert fleet.backends_out is not None
    data = deployment_to_dict(f"{result.strategy}-{spec.name}", spec.name, result.replicas)
    servers = fleet_servers(spec, None, deployment_from_dict(data, spec, "plan"))
    problem = port_problem(fleet.port, len(servers))
    if problem:
        raise InputError("--fleet-port", "fleet_port", problem)
    text = fleet_backends_yaml(servers, fleet.host, fleet.port)
    try:
        fleet.backends_out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            str(fleet.backends_out), "--backends-out", f"cannot write: {exc}"
        ) from None


def _plan(
    cluster: str,
    workload: str,
    rate: float | None,
    slo_p95: float | None,
    out: Path | None,
    baseline: str | None,
    samples: int,
    seed: int,
    as_json: bool,
    fleet: FleetAddress,
) -> None:
    from scalesched.errors import clean_errors

    @clean_errors
    def go() -> None:
        from scalesched.cluster import get_cluster
        from scalesched.plan.profile import workload_profile
        from scalesched.plan.search import search_plan

        if rate is None:
            raise InputError("--rate", "rate", "give the target rate in workflows/s")
        if not (math.isfinite(rate) and rate > 0):
            raise InputError("--rate", "rate", f"must be a positive finite number, got {rate}")
        if slo_p95 is not None and not (math.isfinite(slo_p95) and slo_p95 > 0):
            raise InputError("--slo-p95", "slo_p95", f"must be positive and finite, got {slo_p95}")
        if baseline not in (None, "independent", "uniform"):
            raise InputError("--baseline", "baseline", "independent or uniform")
        for path, option in ((out, "--out"), (fleet.backends_out, "--backends-out")):
            if path is not None:
                prepare_output_path(path, option)
        spec = get_cluster(cluster)
        profile = workload_profile(workload, samples=samples, seed=seed)
        strategy = baseline or "plan"
        result = search_plan(spec, profile, rate, strategy=strategy)  # type: ignore[arg-type]
        summary = plan_summary(result, slo_p95, out)
        if out is not None:
            _write_plan(result, spec, out, summary)
            typer.echo(f"deployment written to {out}", err=True)
        if fleet.backends_out is not None:
            _write_backends(result, spec, fleet)
            typer.echo(f"backends file written to {fleet.backends_out}", err=True)
        if as_json:
            print_json(summary, NULL_REASONS)
            return
        table = Table(title=f"{strategy} for {workload} on {spec.name} at {rate:g} workflows/s")
        table.add_column("model")
        table.add_column("replicas (GPU type, tp, share: count)")
        for m, counts in summary["allocation"].items():
            table.add_row(m, ", ".join(f"{c}: {n}" for c, n in counts.items()))
        console.print(table)
        for key in (
            "predicted_throughput_wps",
            "predicted_mean_response_s",
            "predicted_p95_response_s",
            "meets_slo",
            "gpus_used",
            "planning_time_s",
        ):
            v = summary[key]
            if v is None:  # meets_slo without --slo-p95
                v = "n/a (no --slo-p95 given)"
            console.print(f"{key}: {_short(v)}")
        for note in result.notes:
            console.print(f"note: {note}")

    go()


@plan_app.command()
def shares(
    workload: Annotated[str, typer.Option(help="Workload preset or WfFormat JSON.")] = (
        "agentic-mix"
    ),
    workflows: Annotated[int, typer.Option(help="Sample executions (workflows).")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the sample executions.")] = 0,
    cluster: Annotated[str, typer.Option(help="Cluster the executions run on.")] = "hetero-16",
    rate: Annotated[
        float, typer.Option(help="Arrival rate of the executions, workflows/s (light).")
    ] = 0.2,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
) -> None:
    """Each LLM's share of a workflow's total LLM time and its CV across workflows, next to
    the CV of the end-to-end response time (the observation the planner rests on)."""
    from scalesched.errors import clean_errors

    @clean_errors
    def go() -> None:
        from scalesched.eval.shares import measure_shares

        if rate <= 0:
            raise InputError("--rate", "rate", "must be positive")
        rep = measure_shares(workload, workflows=workflows, seed=seed, cluster=cluster, rate=rate)
        if as_json:
            print_json(rep.to_dict())
            return
        table = Table(
            title=f"LLM time shares: {workload}, {rep.workflows} workflows on {cluster}, "
            f"seed {seed} (end-to-end: mean {rep.e2e_mean_s:.1f} s, CV {rep.e2e_cv:.2f})"
        )
        for col in ("model", "share", "share CV", "CV where called", "called by", "calls/wf"):
            table.add_column(col, justify="left" if col == "model" else "right")
        for m in rep.models:
            table.add_row(
                m.model,
                f"{m.share_mean:.3f}",
                f"{m.share_cv:.2f}",
                f"{m.share_cv_present:.2f}",
                f"{m.present_fraction:.0%}",
                f"{m.calls_per_workflow:.2f}",
            )
        console.print(table)
        console.print(
            f"CV across workflows: end-to-end response {rep.e2e_cv:.2f}, "
            f"total LLM time {rep.llm_time_cv:.2f}"
        )

    go()
