"""``scalesched memplan``: plan one training iteration's memory; ``memplan replay FILE``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from scalesched.errors import (
    InputError,
    check_output_path,
    clean_errors,
    prepare_output_path,
    print_json,
)
from scalesched.memplan.costs import hardware, resolve_gpu, resolve_model, train_costs
from scalesched.memplan.plan import evaluate
from scalesched.memplan.planner import (
    STRATEGIES,
    check_strategy,
    max_batch,
    plan_strategy,
    read_plan,
    summary,
    write_plan,
)
from scalesched.memplan.replay import replay

memplan_app = typer.Typer(
    help="LazyTrain-style MILP memory planner for training one model on one GPU (docs/memplan.md).",
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()

NULL_REASONS = {
    "gap": "the solver proved no bound (no feasible plan within the time limit), so the "
    "optimality gap is undefined",
    "iteration_time_s": "the plan does not fit the GPU: it has no iteration time",
    "predicted_iteration_time_s": "the plan does not fit the GPU: it has no iteration time",
    "tflops": "the plan does not fit the GPU: it has no throughput",
}
"""Why a ``--json`` figure is ``null`` (see :func:`scalesched.errors.json_safe`)."""


def _print(figures: dict[str, Any], title: str) -> None:
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, _text(value))
    console.print(table)


def _text(value: Any) -> str:
    """A figure as a person reads it: floats to 4 significant digits, a count per kind as
    ``keep 30, recompute 2`` (not a Python dict), a missing figure as ``n/a``."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items()) or "none"
    return str(value)


def _prepare_outputs(out: Path | None, plot: Path | None) -> None:
    """The plan file's and the chart's paths checked (their folders made) before solving."""
    if out is not None:
        prepare_output_path(out, "--out")
    if plot is not None:
        prepare_output_path(plot, "--plot", "image")


def _announce(text: str) -> None:
    """A written file, on stderr (stdout stays the table or the JSON object)."""
    typer.echo(text, err=True)


@memplan_app.callback(invoke_without_command=True)
@clean_errors
def memplan(
    ctx: typer.Context,
    model: Annotated[
        str | None, typer.Option(help="Model as the cost model names it, e.g. llama-2-7b.")
    ] = None,
    gpu: Annotated[
        str | None, typer.Option(help="GPU type, e.g. A100-80G, L4-24G (or a unique prefix).")
    ] = None,
    batch: Annotated[int, typer.Option(help="Sequences per iteration (one micro-batch).")] = 8,
    seq: Annotated[int, typer.Option(help="Tokens per sequence.")] = 2048,
    strategy: Annotated[str, typer.Option(help=f"Planner: {', '.join(STRATEGIES)}.")] = "milp",
    cpu_mem_gb: Annotated[
        float | None, typer.Option(help="Host memory the plan may use (default 1024 GB).")
    ] = None,
    pcie_gbs: Annotated[
        float | None,
        typer.Option(help="PCIe GB/s per direction (default 50 on H100 hosts, else 25)."),
    ] = None,
    nvme_read_gbs: Annotated[float | None, typer.Option(help="NVMe read GB/s (default 6).")] = None,
    nvme_write_gbs: Annotated[
        float | None, typer.Option(help="NVMe write GB/s (default 5).")
    ] = None,
    time_limit: Annotated[
        float, typer.Option(help="MILP time limit in seconds; the best plan found is kept.")
    ] = 60.0,
    find_max_batch: Annotated[
        bool,
        typer.Option(
            "--max-batch/--no-max-batch",
            help="Also search the largest batch that fits (one solve per probe).",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the plan file (input of `memplan replay`).")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option(help="Write a PNG of the plan's timeline and memory.")
    ] = None,
) -> None:
    """Plan activations (keep, offload to CPU/NVMe, recompute) and optimizer state for one
    iteration, and print iteration_time_s, tflops, peak_gpu_mem_gb, max_batch,
    solver_time_s and gap (from the replay of the plan)."""
    if ctx.invoked_subcommand is not None:
        return
    if model is None:
        raise InputError("--model", "model", "required (e.g. --model llama-2-7b)")
    if gpu is None:
        raise InputError("--gpu", "gpu", "required (e.g. --gpu A100-80G)")
    check_strategy(strategy)
    _prepare_outputs(out, plot)
    if not (math.isfinite(time_limit) and time_limit > 0):
        raise InputError("--time-limit", "time-limit", f"must be > 0 and finite, got {time_limit}")
    model = resolve_model(model)
    hw = hardware(
        resolve_gpu(gpu),
        pcie_gbs=pcie_gbs,
        nvme_read_gbs=nvme_read_gbs,
        nvme_write_gbs=nvme_write_gbs,
        cpu_mem_gb=cpu_mem_gb,
    )
    costs = train_costs(model, hw.gpu, batch, seq, hw)
    result = plan_strategy(costs, strategy, time_limit_s=time_limit)
    mb = max_batch(model, hw, seq, strategy, time_limit_s=time_limit) if find_max_batch else None
    figures = summary(result, mb)
    if out is not None:
        write_plan(result, out, mb)
        _announce(f"plan written to {out}")
    if plot is not None and result.replayed is not None:
        from scalesched.memplan.plot import plot_timeline

        title = f"{strategy}: {model} on {hw.gpu}, batch {batch} x {seq} ({result.status})"
        plot_timeline(result.replayed, plot, title=title, caps_gb={"gpu": hw.gpu_mem_bytes / 1e9})
        _announce(f"timeline written to {plot}")
    if as_json:
        print_json(figures, NULL_REASONS)
        return
    _print(figures, f"memplan {strategy}: {model} on {hw.gpu}, batch {batch} x {seq}")


@memplan_app.command("replay")
@clean_errors
def replay_cmd(
    plan_file: Annotated[Path, typer.Argument(help="A plan file written by `memplan --out`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write a PNG of the plan's timeline and memory.")
    ] = None,
) -> None:
    """Execute a plan file step by step and print its iteration time and peak memory."""
    if plot is not None:
        check_output_path(plot, "--plot", "image")
    costs, plan, strategy = read_plan(plan_file)
    rep = replay(costs, plan)
    predicted = evaluate(costs, plan)
    figures = {
        "model": costs.model,
        "gpu": costs.hw.gpu,
        "batch": costs.batch,
        "seq": costs.seq,
        "strategy": strategy,
        "state": plan.state,
        "fits": rep.fits,
        "iteration_time_s": rep.iteration_s,
        "predicted_iteration_time_s": predicted.iteration_s,
        "tflops": rep.tflops,
        "peak_gpu_mem_gb": rep.peak_bytes["gpu"] / 1e9,
        "peak_cpu_mem_gb": rep.peak_bytes["cpu"] / 1e9,
        "peak_nvme_gb": rep.peak_bytes["nvme"] / 1e9,
        "gpu_mem_cap_gb": costs.hw.gpu_mem_bytes / 1e9,
    }
    if plot is not None:
        from scalesched.memplan.plot import plot_timeline

        title = f"replay of {plan_file.name}: {costs.model} on {costs.hw.gpu}"
        plot_timeline(rep, plot, title=title, caps_gb={"gpu": costs.hw.gpu_mem_bytes / 1e9})
        _announce(f"timeline written to {plot}")
    if as_json:
        print_json(figures, NULL_REASONS)
        return
    _print(figures, f"replay of {plan_file}")
