"""How long a run must be: ``--workflows auto`` grows a run until its answer is as precise
as asked.

Nobody can guess the length a steady-state comparison needs (1500 workflows suffice on
one cluster and are a cold start on another), so the run says it: it starts at
``start_workflows(N)``, doubles (or, where the measured arrivals span fewer than
``MIN_SPAN_RESPONSES`` mean responses, jumps to the length that spans them), and stops
at the first length whose interval is at most ``precision`` of the figure (the mean
response time of a run, or a paired ratio in a study) and whose runs are steady, or at the
cap. A run that is overloaded (queues grow, or
it delivers less than arrives) stops growing at once: more workflows cannot make it
steady. Each length is a fresh run on the same seed; the workflows of a shorter run are the
first ones of the longer run, so doubling costs at most twice the final run.

Arrivals that follow a recorded shape stretched over the run (``azure-conv``,
``azure-code``) or a replayed file have no steady state to reach; auto refuses them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scalesched.errors import InputError
from scalesched.sim.scenario import MAX_WORKFLOWS

AUTO = "auto"
DEFAULT_PRECISION = 0.01
"""Half-width of the 95% interval, as a share of the figure, that ``auto`` stops at."""
MIN_START = 2000
"""Workflows of the first run (more on large clusters: ``start_workflows``)."""
START_PER_SERVER = 16
"""A first run holds at least this many workflows per server: a large cluster's arrivals
must span several response times before a window means anything."""
DEFAULT_CAP = 32_000
"""Most workflows of one run unless ``--max-workflows`` says otherwise (more on large
clusters: ``cap_workflows``)."""
MIN_SPAN_RESPONSES = 16.0
"""A window's arrivals should span at least this many mean responses: batch means over
20 batches then hold batches of most of a response each. On planned deployments rates are
high (hetero-48 at load 0.7: 45 workflows/s), so a fixed count spans little time: 4000
workflows there span 88 s, three responses, where the drift test has nothing to go on. A
shorter attempt makes the next length the one that spans this (at least a doubling)."""
STEADY_ARRIVALS = ("poisson", "bursty")
"""Arrival processes whose rate does not change over the run (bursty: a stationary MMPP)."""


def parse_workflows(text: str | int, option: str = "--workflows") -> int | None:
    """``auto`` (None) or a positive count."""
    if isinstance(text, int):
        value = text
    elif text.strip().lower() == AUTO:
        return None
    else:
        try:
            value = int(text)
        except ValueError:
            raise InputError(
                option, option.lstrip("-"), f"expected a positive count or 'auto', got {text!r}"
            ) from None
    if not 1 <= value <= MAX_WORKFLOWS:
        raise InputError(
            option, option.lstrip("-"), f"must be in [1, {MAX_WORKFLOWS}] or 'auto', got {value}"
        )
    return value


def check_precision(precision: float) -> float:
    if not 0.0 < precision < 1.0:
        raise InputError(
            "--precision", "precision", f"must be a share in (0, 1), e.g. 0.01; got {precision}"
        )
    return precision


def check_steady_arrivals(arrivals: str) -> None:
    """Refuse ``auto`` for arrivals with no steady state, in one line saying why (an unknown
    process is refused as such first)."""
    from scalesched.sim.scenario import check_arrivals

    if not arrivals.startswith("replay:"):
        check_arrivals(arrivals, 2)
    if arrivals not in STEADY_ARRIVALS:
        raise InputError(
            "--workflows",
            "workflows",
            f"arrivals {arrivals!r} follow a recorded shape (or file) stretched over the run, "
            "so no run length reaches a steady state; give --workflows N",
        )


def start_workflows(n_servers: int) -> int:
    return max(MIN_START, START_PER_SERVER * n_servers)


def cap_workflows(n_servers: int, cap: int | None = None) -> int:
    return cap if cap is not None else max(DEFAULT_CAP, 4 * start_workflows(n_servers))


def span_in_responses(metrics: Mapping[str, Any]) -> float | None:
    """How many mean responses a run's measured arrivals span (its window's workflows over
    their arrival rate, over the mean response); None where the metrics cannot say."""
    try:
        n = float(metrics["measured_workflows"])
        rate = float(metrics["offered_rate_wps"])
        mean = float(metrics["avg_response_time_s"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (n > 0 and rate > 0 and mean > 0) or not math.isfinite(n / rate / mean):
        return None
    return n / rate / mean


def next_length(attempt: Attempt, top: int) -> int:
    """The length after ``attempt``: double it, or more where its window spans fewer than
    ``MIN_SPAN_RESPONSES`` responses (scaled to span them, rounded up to a thousand); the
    cap ``top`` where that would come within 1.5x of it (a last step of 15,000 to 16,000
    workflows costs a whole round and tells little more)."""
    n = 2 * attempt.workflows
    span = attempt.span_responses
    if span is not None and 0 < span < MIN_SPAN_RESPONSES:
        wanted = attempt.workflows * MIN_SPAN_RESPONSES / span
        n = max(n, 1000 * math.ceil(wanted / 1000))
    return top if 1.5 * n > top else n


@dataclass(frozen=True)
class Attempt:
    """One length tried: the figure, its half-width and whether its runs were steady."""

    workflows: int
    figure: float
    half_width: float
    steady: bool
    overloaded: bool = False
    span_responses: float | None = None
    """How many mean responses the measured arrivals span (the least over the runs behind
    the figure); None where not known."""

    @property
    def relative(self) -> float:
        return self.half_width / abs(self.figure) if self.figure else float("inf")

    def precise(self, precision: float) -> bool:
        return self.steady and self.relative <= precision


def grow(
    attempt_at: Callable[[int], Attempt],
    n_servers: int,
    precision: float,
    *,
    cap: int | None = None,
    say: Callable[[str], None] | None = None,
) -> tuple[Attempt, list[Attempt]]:
    """Run ``attempt_at`` at each length until one is precise (or overloaded, or the cap);
    the last attempt and all of them. ``say`` gets one plain line per attempt."""
    tried: list[Attempt] = []
    n, top = start_workflows(n_servers), cap_workflows(n_servers, cap)
    n = min(n, top)
    while True:
        a = attempt_at(n)
        tried.append(a)
        state = "steady" if a.steady else ("overloaded" if a.overloaded else "not steady")
        done = a.precise(precision) or a.overloaded or n >= top
        following = n if done else next_length(a, top)
        if say is not None:
            say(
                f"auto: {n} workflows: {a.figure:.4g} ± {a.half_width:.2g} "
                f"({100 * a.relative:.1f}%, target {100 * precision:g}%), {state}"
                + ("" if done else f"; next {following}")
            )
        if done:
            return tried[-1], tried
        n = following
