"""What several commands share: the consoles, the checks of options that name an output or a
cache mode, the progress bar, and the human table of a run's metrics.

Why one module: ``simulate``, ``run`` and ``eval`` take the same cache options and write the
same trace and chart, and a check that differs between two commands is a bug a user meets
in one of them only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from scalesched.errors import InputError, prepare_output_path

console = Console()
err_console = Console(stderr=True)


ArrivalsOpt = Annotated[
    str,
    typer.Option(
        help="Arrival process: poisson, bursty, azure-conv or azure-code (a production hour's "
        "request-rate shape, stretched over the run at the offered load) or replay:PATH."
    ),
]


ProgressOpt = Annotated[
    bool,
    typer.Option(
        help="Progress on stderr: a bar on a terminal, else a plain line every tenth of the "
        "work (a log or CI job is never silent for minutes)."
    ),
]


KvPolicyOpt = Annotated[
    str,
    typer.Option(
        help="KV state across LLM calls: off (engines keep nothing between calls), nocache "
        "(the same, with the cache metrics measured), or keep sessions and prefix caches "
        "and evict by lru, ttl (protected for the predicted tool time) or agent-aware "
        "(weighted by the agent's re-entries and the tasks waiting on it); see "
        "docs/cache.md. Adds the cache metrics to the output."
    ),
]


ToolRepeatOpt = Annotated[
    float,
    typer.Option(
        help="Probability that a tool task repeats an earlier identical call (same tool, "
        "same inputs) of its workflow, drawn on a stream of its own; 0 (default): no "
        "repeats, the workload unchanged. See docs/tail.md."
    ),
]


ToolCacheOpt = Annotated[
    str,
    typer.Option(
        help="on: a repeated tool call whose original has finished returns the cached result "
        "(1 ms, no core, no external wait) and tool_cache_hits / tool_cache_saved_s are "
        "reported; a repeat whose original is still running runs normally. off: every call "
        "runs."
    ),
]


def logits_cache_mode(value: str) -> bool | None:
    """``--logits-cache`` checked: True (on), False (measure), None (off)."""
    modes = {"on": True, "measure": False, "off": None}
    if value not in modes:
        raise InputError(
            "--logits-cache", "logits-cache", f"must be on, measure or off, got {value!r}"
        )
    return modes[value]


def tool_cache_on(value: str) -> bool:
    """``--tool-cache`` checked."""
    if value not in ("on", "off"):
        raise InputError("--tool-cache", "tool-cache", f"must be on or off, got {value!r}")
    return value == "on"


def kv_policy_mode(value: str) -> str | None:
    """``--kv-policy`` checked: None for off."""
    from scalesched.cache.kv import KV_MODES

    if value == "off":
        return None
    if value not in KV_MODES:
        known = ", ".join(("off", *KV_MODES))
        raise InputError("--kv-policy", "kv-policy", f"unknown policy {value!r}; known: {known}")
    return value


def window_size(
    value: int | None, workflows: int, option: str, default: Callable[[int], int]
) -> int:
    """``--warmup`` / ``--cooldown``: the default share of the run, or a count that leaves at
    least one workflow measured."""
    if value is None:
        return default(workflows)
    if value < 0 or value >= workflows:
        raise InputError(option, option.lstrip("-"), f"must be in 0..{workflows - 1}")
    return value


def check_outputs(trace: Path | None, gantt: Path | None) -> None:
    """Output paths are checked (their folders made) before a run, not after it."""
    if trace is not None:
        prepare_output_path(trace, "--trace")
    if gantt is not None:
        prepare_output_path(gantt, "--gantt", "image")


def cluster_and_policy(cluster: str, policy: str) -> tuple[Any, Any]:
    """The cluster spec and a fresh scheduler, checked to fit each other: a fixed-size
    network (mlp-16) has no answer at another cluster size."""
    from scalesched.cluster import get_cluster
    from scalesched.policies import get_policy

    spec = get_cluster(cluster)
    scheduler = get_policy(policy)
    if not scheduler.supports(len(spec)):
        why = scheduler.unsupported_reason(len(spec)) or f"{policy} cannot run on this size"
        reason = why.replace(scheduler.name, policy, 1)
        raise InputError(
            "--policy",
            "policy",
            f"{reason}; {spec.name} has {len(spec)} (use a size-agnostic policy such as scale)",
        )
    return spec, scheduler


def announce(text: str) -> None:
    """One plain line on stderr about a file (being) written: stdout stays the report (or
    the JSON object), and no written file goes unmentioned."""
    print(text, file=sys.stderr, flush=True)


def draw_gantt(records: Any, server_names: Any, path: Path, title: str) -> None:
    """The Gantt chart of ``records``, announced before (it takes seconds on a long run)
    and after, with where it went."""
    from scalesched.sim.trace import plot_gantt

    announce(f"drawing Gantt chart of {len(records)} tasks to {path} ...")
    plot_gantt(records, server_names, path, title=title)
    announce(f"Gantt chart written to {path}")


def write_run_outputs(
    result: Any, trace: Path | None, gantt: Path | None, title: str, *, trace_written: bool
) -> None:
    """The per-task trace and the Gantt chart of a finished run (each when asked for, each
    announced); ``trace_written``: the run streamed its trace to the file already."""
    if trace is not None:
        if not trace_written:
            from scalesched.sim.trace import write_trace

            write_trace(result.trace, result.server_names, trace)
        announce(f"trace written to {trace}")
    if gantt is not None:
        draw_gantt(result.trace, result.server_names, gantt, title)


class Tick:
    """Reports ``done`` of one progress series (optionally with a few words of detail, such
    as training's latest episode time)."""

    def __call__(self, done: int, detail: str = "") -> None:
        return None


class _BarTick(Tick):
    def __init__(self, bar: Any, label: str, total: int) -> None:
        self.bar, self.label = bar, label
        self.task = bar.add_task(label, total=total)

    def __call__(self, done: int, detail: str = "") -> None:
        text = f"{self.label} ({detail})" if detail else self.label
        self.bar.update(self.task, completed=done, description=text)


class _LineTick(Tick):
    """Plain lines on stderr: one when the series starts, one at each further tenth done
    once ``LINE_GAP_S`` have passed since the last line (a run of a second says where it
    starts and ends, not eleven times), one when a minute has passed without a line, and
    one at the end."""

    def __init__(self, label: str, total: int, unit: str) -> None:
        self.label, self.total, self.unit = label, max(total, 1), unit
        self.t0 = self.last_t = time.monotonic()
        self.last_tenth = 0
        self._line(0, "")

    def __call__(self, done: int, detail: str = "") -> None:
        tenth = 10 * done // self.total
        now = time.monotonic()
        quiet = now - self.last_t
        if (
            done >= self.total
            or (tenth > self.last_tenth and quiet >= LINE_GAP_S)
            or quiet >= LINE_EVERY_S
        ):
            self.last_tenth, self.last_t = tenth, now
            self._line(done, detail)

    def _line(self, done: int, detail: str) -> None:
        elapsed = time.monotonic() - self.t0
        extra = f", {detail}" if detail else ""
        unit = f" {self.unit}" if self.unit else ""
        print(
            f"{self.label}: {done}/{self.total}{unit} ({done / self.total:.0%}), "
            f"{elapsed:.0f} s{extra}",
            file=sys.stderr,
            flush=True,
        )


LINE_EVERY_S = 60.0
"""Longest silence between plain progress lines while work advances."""
LINE_GAP_S = 2.0
"""Shortest gap between two plain lines before the end: a tenth done sooner waits."""


class progress_bar:
    """Progress over a long run, on stderr: a rich bar on a terminal; elsewhere (a log
    file, a CI job, a pipe) plain lines, because a bar there prints nothing and a
    many-minute run would look hung; nothing when ``show`` is false (``--no-progress``,
    ``--json``). The one progress helper of the commands, so they all behave alike.

    ``with progress_bar(show, total, label) as tick`` gives the first series' :class:`Tick`;
    :meth:`series` adds another one (a bar, or its own lines) to the same display."""

    def __init__(self, show: bool, total: int, label: str, unit: str = "") -> None:
        self.show, self.total, self.label, self.unit = show, total, label, unit
        self._bar: Any = None

    def __enter__(self) -> Tick:
        if self.show and sys.stderr.isatty():
            from rich.progress import Progress

            self._bar = Progress(console=err_console, transient=True)
            self._bar.__enter__()
        return self.series(self.label) if self.label else Tick()

    def series(self, label: str, total: int | None = None) -> Tick:
        """Another progress series of ``total`` (default: the helper's) named ``label``."""
        total = self.total if total is None else total
        if not self.show:
            return Tick()
        if self._bar is not None:
            return _BarTick(self._bar, label, total)
        return _LineTick(label, total, self.unit)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


NARROW: dict[str, Any] = {
    "box": box.SIMPLE_HEAD,
    "collapse_padding": True,
    "pad_edge": False,
}
"""The layout of tables with many columns: without vertical rules and with one space between
columns, ten columns of figures fit 80 columns with the policy names whole (boxed,
headroom's names were cut to 'heft…' and its figures next)."""


def print_markdown(text: str) -> None:
    """A markdown report (eval's and demo's summary.md) on the console: pipe tables as rich
    tables, whose columns shrink and wrap inside their cells to the terminal's width (printed
    as text, a row wider than 80 columns broke in the middle), and the prose as text."""
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            console.print(markdown_table(block))
            block = []
        console.print(line, markup=False, highlight=False)
    if block:
        console.print(markdown_table(block))


def markdown_table(lines: list[str]) -> Table:
    """A pipe table (header, ``|---|`` rule, rows) as a rich table; numeric-looking cells
    right-aligned by their header's column."""

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    header, *rows = lines
    rows = [r for r in rows if set(r) - set("|-: ")]  # drop the rule line
    table = Table(**NARROW)
    for i, name in enumerate(cells(header)):
        table.add_column(
            name, justify="left" if i == 0 else "right", no_wrap=i == 0, overflow="fold"
        )
    for row in rows:
        table.add_row(*cells(row))
    return table


NOT_STEADY_MARK = "  (not steady)"
"""Beside each figure of a run off steady state that describes the policy."""
STEADY_DEPENDENT = ("response_time", "slowdown", "bound_ratio", "queue_delay", "in_system")
"""Metric names (substrings) whose value means nothing for the policy off steady state."""


def metrics_table(title: str, metrics: dict[str, Any]) -> Table:
    """The human table of one run's metrics; when the run was not at steady state, each
    response-time figure says so beside the number, and the caption says why."""
    steady = bool(metrics.get("steady_state", True))
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in metrics.items():
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        if not steady and any(part in key for part in STEADY_DEPENDENT):
            text += NOT_STEADY_MARK
        table.add_row(key, text)
    if not steady:
        table.caption = (
            "NOT AT STEADY STATE: the figures marked '(not steady)' describe the run's "
            "start-up or an overload, not the policy"
        )
    return table
