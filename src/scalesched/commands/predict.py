"""``scalesched predict fit|eval|drift``: train a quantile predictor on simulator traces,
score it against the static per-role estimate on unseen seeds, and watch it under an
injected slowdown with and without online recalibration (docs/tail.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scalesched.commands.common import announce
from scalesched.errors import check_output_path, print_json

predict_app = typer.Typer(
    help="Distributional predictors of task duration and output tokens (docs/tail.md).",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)

Cluster = Annotated[str, typer.Option(help="Cluster preset or YAML file the traces run on.")]
Workload = Annotated[str, typer.Option(help="Workload preset or WfFormat JSON.")]
ModelFile = Annotated[str, typer.Option(help="Predictor file, or 'default' for the shipped one.")]
Workflows = Annotated[int, typer.Option(help="Workflows simulated for the traces.")]
Load = Annotated[
    float, typer.Option(help="Arrival rate as a fraction of the cluster's measured capacity.")
]
Policy = Annotated[
    str, typer.Option(help="Policy that places tasks while the traces are recorded.")
]
_NO_SAMPLES = "no samples in this group (or phase): the score is undefined"
NULL_REASONS = {
    "coverage_80": _NO_SAMPLES,
    "coverage_90": _NO_SAMPLES,
    "pinball_loss": _NO_SAMPLES,
    "crps": _NO_SAMPLES,
}
"""Why a ``--json`` score is ``null`` (see :func:`scalesched.errors.json_safe`)."""
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


@predict_app.command()
def fit(
    out: Annotated[Path, typer.Option(help="Predictor file to write (.npz).")],
    cluster: Cluster = "hetero-16",
    workload: Workload = "agentic-mix",
    workflows: Workflows = 1500,
    seed: Annotated[
        int, typer.Option(help="Seed of the traces and of the fit (keep it off eval seeds).")
    ] = 101,
    load: Load = 0.8,
    policy: Policy = "soft_eft",
    as_json: AsJson = False,
) -> None:
    """Simulate, record one sample per executed task, and fit both heads (tokens and
    duration quantiles) and the static per-role baseline."""
    from scalesched.errors import clean_errors

    @clean_errors
    def go() -> None:
        from scalesched.predict.model import save
        from scalesched.runs.traces import fit_on_traces

        check_output_path(out, "--out", makes_folders=True)  # save() makes the folder
        predictor = fit_on_traces(
            cluster, workload, workflows=workflows, seeds=[seed], load=load, policy=policy
        )
        save(predictor, out)
        announce(f"predictor written to {out}")
        summary: dict[str, Any] = {"out": str(out), **predictor.meta}
        if as_json:
            print_json(summary)
        else:
            print(_lines(summary))

    go()


@predict_app.command("eval")
def evaluate(
    model: ModelFile = "default",
    cluster: Cluster = "hetero-16",
    workload: Workload = "agentic-mix",
    workflows: Workflows = 1500,
    seed: Annotated[int, typer.Option(help="Seed of the evaluation traces (unseen).")] = 9001,
    load: Load = 0.8,
    policy: Policy = "soft_eft",
    plot: Annotated[
        Path | None,
        typer.Option(
            help="Also draw the calibration plot (predicted quantile level against the "
            "observed share below it, per head, model and static per-role spread) to this "
            "image file (.png, .svg, .pdf, ...)."
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """coverage_80, coverage_90, pinball_loss and crps of the model, the static per-role
    spread and the static point estimate, per head, on fresh traces; with ``--plot``, the
    calibration plot too (the JSON carries its table under each head's ``calibration``)."""
    from scalesched.errors import clean_errors

    @clean_errors
    def go() -> None:
        from scalesched.cluster import get_cluster
        from scalesched.predict.model import default_predictor
        from scalesched.predict.model import load as load_model
        from scalesched.runs.traces import TraceRun, evaluate_on_traces

        if plot is not None:
            check_output_path(plot, "--plot", "image")
        predictor = default_predictor() if model == "default" else load_model(model)
        run = TraceRun(get_cluster(cluster), workload, workflows, seed, load, policy)
        report = evaluate_on_traces(predictor, run)
        if plot is not None:
            from scalesched.predict.plot import plot_calibration

            plot_calibration(
                report["heads"],
                plot,
                title=f"{report['cluster']}, {workload}, load {load}, seed {seed}, "
                f"placed by {policy}",
            )
            announce(f"calibration plot written to {plot}")
        if as_json:
            print_json(report, NULL_REASONS)
            return
        for head, rows in report["heads"].items():
            print(f"{head} ({int(rows['samples']['n'])} samples)")
            for name in ("model", "static_role", "static_point"):
                s = rows[name]
                print(
                    f"  {name:13s} coverage_80 {s['coverage_80']:.3f}  coverage_90 "
                    f"{s['coverage_90']:.3f}  pinball {s['pinball_loss']:.4g}  crps {s['crps']:.4g}"
                )

    go()


@predict_app.command()
def drift(
    drift: Annotated[
        str,
        typer.Option(
            help="GPU_TYPE:FACTOR@TIME: from TIME (simulated s) on, engines on that GPU type "
            "decode FACTOR times slower; schedulers and the predictor are not told."
        ),
    ],
    model: ModelFile = "default",
    cluster: Cluster = "hetero-16",
    workload: Workload = "agentic-mix",
    workflows: Workflows = 1500,
    seed: Annotated[int, typer.Option(help="Seed of the run (unseen by the predictor).")] = 9001,
    load: Load = 0.8,
    policy: Policy = "soft_eft",
    window: Annotated[
        int, typer.Option(help="Completed tasks per GPU type in the recalibration window.")
    ] = 1000,
    as_json: AsJson = False,
) -> None:
    """Coverage of the duration head before, during and after an injected slowdown, as
    trained and with sliding-window recalibration; p99 response per phase. A policy that
    routes on durations (tail, pred_mean) runs twice: routing as trained, and routing on
    the recalibrated durations."""
    from scalesched.errors import clean_errors

    @clean_errors
    def go() -> None:
        from scalesched.cluster import get_cluster
        from scalesched.eval.drift import drift_study
        from scalesched.predict.model import default_predictor
        from scalesched.predict.model import load as load_model
        from scalesched.runs.traces import TraceRun

        predictor = default_predictor() if model == "default" else load_model(model)
        run = TraceRun(get_cluster(cluster), workload, workflows, seed, load, policy)
        report = drift_study(predictor, run, drift, window=window)
        if as_json:
            print_json(report, NULL_REASONS)
            return
        arms = [("", report)]
        if "routing_adapted" in report:
            arms = [
                ("routing as trained: ", report),
                ("routing adapted: ", report["routing_adapted"]),
            ]
        for arm, r in arms:
            for scope, phases in r["coverage"].items():
                for name, e in phases.items():
                    st, ad = e["static"], e["adaptive"]
                    print(
                        f"{arm}{scope:8s} {name:7s} n={e['n']:6d}  coverage_90 as trained "
                        f"{st['coverage_90']:.3f} adaptive {ad['coverage_90']:.3f}  pinball "
                        f"{st['pinball_loss']:.3g} / {ad['pinball_loss']:.3g}"
                    )
            for name, v in r["p99_response_s"].items():
                mean = r["mean_response_s"][name]
                print(
                    f"{arm}p99 response of workflows arriving {name}: {v:.1f} s (mean {mean:.1f} s)"
                )

    go()


def _lines(d: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in d.items())
