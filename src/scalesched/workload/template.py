"""Workflow templates with dynamic rules, and their realisation into concrete DAGs.

A :class:`WorkflowTemplate` is a DAG of :class:`TaskTemplate` joined by :class:`Edge`, plus
*dynamic rules* whose outcome is drawn each time the template is realised:

``FanOut(decider, body, width)``
    The body (a convex sub-DAG) is copied ``w`` times, ``w`` drawn from ``width``
    (``int``, :class:`UniformInt` or :class:`Pmf`, always >= 1).  Copies are named
    ``t#0 .. t#{w-1}``.  Edges inside the body join copy ``i`` to copy ``i``; an external
    parent feeds every copy and every copy feeds an external child.  Every copy has
    ``revealed_by`` = the decider's index.
``Branch(decider, options)``
    Exactly one option (a set of task ids, possibly empty) is drawn with its probability;
    the tasks of the other options disappear with all their edges.  A kept task that had
    parents and lost all of them gets the decider as its only parent (0 bytes).  Kept
    option tasks have ``revealed_by`` = the decider's index.
``Loop(decider, body, max_iter, continue_prob, carry_bytes)``
    The body (a convex sub-DAG containing the decider, which must be a sink of the body)
    runs ``k`` iterations: after each iteration ``j < max_iter`` the loop goes on with
    probability ``continue_prob`` (so ``k`` is a truncated geometric on [1, max_iter]).
    Iteration 0 keeps the template ids; iteration ``j > 0`` copies are named ``t@j``.  The
    entries of iteration ``j > 0`` (body tasks without a parent in the body) depend on
    ``decider@(j-1)`` through an edge of ``carry_bytes``, and every task of iteration
    ``j > 0`` has ``revealed_by`` = the index of ``decider@(j-1)``.  Edges from outside into
    the body feed every iteration (the loop re-reads its inputs); edges from the body to
    the outside leave from the last iteration only.

Rules are not nested: a task belongs to at most one rule body (a fan-out body, one branch
option, or a loop body).  The decider of a fan-out or branch is a *static* task (in no
rule body); it must reach every task it reveals through static tasks and tasks of the
same rule, so that whatever the other branches drop, it stays an ancestor of what it
reveals.  A static task may also name a static ``revealed_by`` (used when a realised
instance is saved and reloaded); the same ancestry rule applies.

All of this is checked once, when the template is built (networkx is used there only);
:func:`realize` then runs on precomputed integer plans and plain Python lists.

Realised tasks come out in a topological order: template tasks in a topological order of
the template with each loop body kept contiguous and unrolled iteration by iteration,
fan-out copies of a task next to one another.

Numbers that vary per realisation use small distribution records: a plain ``float`` is
fixed, :class:`Uniform` (estimate = mean) and :class:`LogNormal` (estimate = median).
LLM token counts are an ``int`` or a :class:`TokenSpec` naming a production-trace
distribution of :mod:`scalesched.workload.tokens`; the *estimate* a scheduler sees for
the output length is ``median × scale`` clipped to ``[lo, hi]``, never the truth.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scalesched.errors import InputError, short_repr
from scalesched.workload.hints import hint_rng, llm_hint, tool_hint
from scalesched.workload.instance import TaskInstance, WorkflowInstance

if TYPE_CHECKING:
    from scalesched.workload.tokens import TokenDist

# --------------------------------------------------------------------------- distributions


@dataclass(frozen=True, slots=True)
class Uniform:
    """Uniform real on ``[lo, hi]``; estimate = mean."""

    lo: float
    hi: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "lo", float(self.lo))
        object.__setattr__(self, "hi", float(self.hi))

    def sample(self, rng: np.random.Generator) -> float:
        return self.lo + (self.hi - self.lo) * float(rng.random())

    @property
    def estimate(self) -> float:
        return 0.5 * (self.lo + self.hi)


@dataclass(frozen=True, slots=True)
class LogNormal:
    """Lognormal with the given median and log-space sigma, clipped to ``[lo, hi]``;
    estimate = the (clipped) median."""

    median: float
    sigma: float
    lo: float = 0.0
    hi: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "median", float(self.median))
        object.__setattr__(self, "sigma", float(self.sigma))
        object.__setattr__(self, "lo", float(self.lo))
        if self.hi is not None:
            object.__setattr__(self, "hi", float(self.hi))

    def sample(self, rng: np.random.Generator) -> float:
        v = self.median * math.exp(self.sigma * float(rng.standard_normal()))
        if v < self.lo:
            return self.lo
        if self.hi is not None and v > self.hi:
            return self.hi
        return v

    @property
    def estimate(self) -> float:
        v = max(self.median, self.lo)
        return v if self.hi is None else min(v, self.hi)


Num = float | Uniform | LogNormal
"""A non-negative quantity: fixed (``float``) or drawn per realised task/edge."""


@dataclass(frozen=True, slots=True)
class UniformInt:
    """Uniform integer on ``[lo, hi]``, both inclusive."""

    lo: int
    hi: int

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.lo, self.hi + 1))


@dataclass(frozen=True, slots=True)
class Pmf:
    """Integer ``values[i]`` with probability ``probs[i]`` (must sum to 1)."""

    values: tuple[int, ...]
    probs: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(int(v) for v in self.values))
        object.__setattr__(self, "probs", tuple(float(p) for p in self.probs))

    def sample(self, rng: np.random.Generator) -> int:
        u = float(rng.random())
        acc = 0.0
        for v, p in zip(self.values, self.probs, strict=True):
            acc += p
            if u < acc:
                return v
        return self.values[-1]


IntNum = int | UniformInt | Pmf
"""A fan-out width: fixed or drawn at run time."""


@dataclass(frozen=True, slots=True)
class TokenSpec:
    """A token count drawn from ``tokens.TOKEN_DISTS[dist]``, scaled and clipped."""

    dist: str
    scale: float = 1.0
    lo: int = 1
    hi: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", float(self.scale))


Tokens = int | TokenSpec


@dataclass(frozen=True, slots=True)
class ToolOption:
    """One tool a task may call; ``None`` cpu_work/ext_latency fall back to the task's."""

    name: str
    weight: float
    cpu_work: Num | None = None
    ext_latency: Num | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight", float(self.weight))
        if self.cpu_work is not None:
            object.__setattr__(self, "cpu_work", _num(self.cpu_work))
        if self.ext_latency is not None:
            object.__setattr__(self, "ext_latency", _num(self.ext_latency))


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tool is drawn per realised task, with probability proportional to weight."""

    options: tuple[ToolOption, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))


def _num(v: Any) -> Any:
    """Coerce plain ints to float so templates compare equal after a JSON round trip."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return float(v)
    return v


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True, slots=True)
class TaskTemplate:
    """One task of a template; see :class:`~scalesched.workload.instance.TaskInstance`."""

    id: str
    kind: str
    """``"llm"`` or ``"tool"``."""
    model: str | None = None
    role: str | None = None
    """Informational for llm tasks (see :mod:`scalesched.workload.roles`)."""
    prompt_tokens: Tokens = 0
    output_tokens: Tokens = 0
    output_tokens_est: int | None = None
    """Override of the estimate (default: median × scale, or the fixed count)."""
    tool: str | ToolChoice | None = None
    cpu_work: Num = 0.0
    ext_latency: Num = 0.0
    ext_latency_est: float | None = None
    """Override of the estimate (default: the distribution's estimate)."""
    revealed_by: str | None = None
    """Static reveal (static tasks only); rule bodies get theirs from the rule."""
    difficulty_hint: float | None = None
    """Fixed difficulty hint (a saved instance); None: drawn at each realisation."""
    prefix_id: str | None = None
    """LLM tasks: the application prompt the call starts with (shared across workflows)."""
    prefix_tokens: int = 0
    """Tokens of that application prompt, prepended to the drawn prompt."""
    session: str | None = None
    """LLM tasks: the agent session the call belongs to; a call's prompt extends the context
    of the nearest earlier call of its session among its ancestors
    (:mod:`scalesched.workload.sessions`)."""
    agreement: float | None = None
    """Session calls copied by a rule (fan-out branches): per-token probability that a
    branch keeps to its group's first path, so its output repeats that path up to the
    first disagreement (:func:`scalesched.workload.sessions.mark_replays`); None: the
    branches are not marked."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_work", _num(self.cpu_work))
        object.__setattr__(self, "ext_latency", _num(self.ext_latency))
        if self.ext_latency_est is not None:
            object.__setattr__(self, "ext_latency_est", _num(self.ext_latency_est))


@dataclass(frozen=True, slots=True)
class Edge:
    src: str
    dst: str
    nbytes: Num = 0.0
    """Payload bytes, drawn per realised edge when a distribution."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nbytes", _num(self.nbytes))


@dataclass(frozen=True, slots=True)
class FanOut:
    decider: str
    body: tuple[str, ...]
    width: IntNum

    def __post_init__(self) -> None:
        object.__setattr__(self, "body", tuple(self.body))


@dataclass(frozen=True, slots=True)
class BranchOption:
    prob: float
    tasks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "prob", float(self.prob))
        object.__setattr__(self, "tasks", tuple(self.tasks))


@dataclass(frozen=True, slots=True)
class Branch:
    decider: str
    options: tuple[BranchOption, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))


@dataclass(frozen=True, slots=True)
class Loop:
    decider: str
    body: tuple[str, ...]
    max_iter: int
    continue_prob: float
    carry_bytes: Num = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "body", tuple(self.body))
        object.__setattr__(self, "continue_prob", float(self.continue_prob))
        object.__setattr__(self, "carry_bytes", _num(self.carry_bytes))


Rule = FanOut | Branch | Loop

KNOWN_KINDS = ("llm", "tool")


def known_models() -> tuple[str, ...]:
    """Model keys a task may name: those of the LLM catalog (``scalesched.cluster.perf``)."""
    from scalesched.cluster.perf import MODELS

    return tuple(MODELS)


def token_dists() -> dict[str, TokenDist]:
    from scalesched.workload.tokens import TOKEN_DISTS

    return TOKEN_DISTS


@dataclass(frozen=True, eq=True)
class WorkflowTemplate:
    """A workflow template; validated and compiled when constructed (raises InputError)."""

    name: str
    tasks: tuple[TaskTemplate, ...]
    edges: tuple[Edge, ...] = ()
    rules: tuple[Rule, ...] = ()
    pattern: str = ""
    """Pattern label of realised instances; defaults to ``name``."""
    description: str = ""
    source: str = field(default="", compare=False, repr=False)
    """Where the template came from, used in error messages."""
    _plan: _Plan = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "rules", tuple(self.rules))
        if not self.pattern:
            object.__setattr__(self, "pattern", self.name)
        src = self.source or f"template {self.name!r}"
        object.__setattr__(self, "source", src)
        object.__setattr__(self, "edges", tuple(self.edges))
        object.__setattr__(self, "_plan", _compile(self))

    def realize(self, rng: np.random.Generator, name: str | None = None) -> WorkflowInstance:
        return realize(self, rng, name)

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.tasks)


# --------------------------------------------------------------------------- validation

_STATIC, _FANOUT, _BRANCH, _LOOP = 0, 1, 2, 3


@dataclass(slots=True)
class _TaskPlan:
    id: str
    kind: str
    model: str | None
    prompt_fixed: int
    prompt_dist: TokenDist | None
    prompt_args: tuple[float, int, int | None]
    output_fixed: int
    output_dist: TokenDist | None
    output_args: tuple[float, int, int | None]
    output_est: int
    tool: str | None
    tool_names: tuple[str, ...]
    tool_cum: tuple[float, ...]
    tool_cpu: tuple[Num, ...]
    tool_ext: tuple[Num, ...]
    tool_ext_est: tuple[float, ...]
    cpu_work: Num
    ext_latency: Num
    ext_est: float
    role: str | None = None
    hint: float | None = None
    prefix_id: str | None = None
    prefix_tokens: int = 0
    session: str | None = None
    agreement: float | None = None


@dataclass(slots=True)
class _Plan:
    tasks: list[_TaskPlan]
    member: list[int]  # _STATIC/_FANOUT/_BRANCH/_LOOP
    rule_of: list[int]  # rule index, -1 for static
    option_of: list[int]  # branch option index, -1 otherwise
    static_rb: list[int]  # template index of a static revealed_by, -1 none
    blocks: list[tuple[int, tuple[int, ...]]]  # (-1, (t,)) single task or (rule, body order)
    copy_ids: list[list[str]]  # precomputed ids of copies
    edges: list[tuple[int, int, Num, int]]  # (u, v, bytes, relation) 0 cross 1 pairwise
    u_is_loop: list[bool]
    rules: list[tuple[Any, ...]]
    loop_entries: dict[int, tuple[int, ...]]
    orphan_dec: list[tuple[int, int]]  # (task, decider) for tasks whose parents are all in branches
    has_sessions: bool = False  # some task carries a prefix or a session (sessions.py)
    has_replays: bool = False  # some task carries an agreement (sessions.mark_replays)


# --------------------------------------------------------------------------- limits
# Documented in docs/wfformat.md. They keep every realised number finite and every
# realised workflow small enough to build: a hostile file fails here, naming the field,
# instead of overflowing or filling memory later.

MAX_SECONDS = 1e7
"""Largest cpu work / external latency of one task, seconds (about 116 days)."""
MAX_BYTES = 1e15
"""Largest payload of one edge, bytes (1 PB)."""
MAX_TOKENS = 1 << 20
"""Largest prompt or output of one LLM call, tokens (the largest possible draw counts)."""
MAX_TOKEN_SCALE = 1e4
MAX_SIGMA = 5.0
"""Largest lognormal sigma: draws stay finite (``exp(5 z)``) whatever the clip."""
MAX_FANOUT_WIDTH = 4096
MAX_LOOP_ITER = 4096
MAX_REALISED_TASKS = 100_000
"""Most tasks one realisation may have (its largest possible fan-outs and loops)."""
MAX_REALISED_EDGES = 2_000_000


def _err(t: WorkflowTemplate, fld: str, msg: str) -> InputError:
    return InputError(t.source, fld, msg)


def quantity_problem(v: Any, cap: float = MAX_SECONDS) -> str | None:
    """What is wrong with a non-negative quantity (a number or a distribution) whose
    largest value (or clip / median) must be at most ``cap``; None when nothing is."""
    if isinstance(v, bool) or not isinstance(v, float | int | Uniform | LogNormal):
        return f"expected a number or a distribution, got {short_repr(v)}"
    if isinstance(v, float | int):
        if isinstance(v, int) and abs(v) > 1e300 or not math.isfinite(v) or v < 0 or v > cap:
            return f"must be a finite number in [0, {cap:g}], got {short_repr(v)}"
    elif isinstance(v, Uniform):
        if not (math.isfinite(v.lo) and math.isfinite(v.hi)) or v.lo < 0 or v.hi < v.lo:
            return f"uniform needs 0 <= lo <= hi, got lo={v.lo}, hi={v.hi}"
        if v.hi > cap:
            return f"uniform hi must be <= {cap:g}, got {v.hi}"
    else:
        if not (math.isfinite(v.median) and 0 < v.median <= cap):
            return f"lognormal median must be in (0, {cap:g}], got {v.median}"
        if not (math.isfinite(v.sigma) and 0 <= v.sigma <= MAX_SIGMA):
            return f"lognormal sigma must be in [0, {MAX_SIGMA:g}], got {v.sigma}"
        if not math.isfinite(v.lo) or v.lo < 0 or (v.hi is not None and v.hi < v.lo):
            return f"lognormal clip needs 0 <= lo <= hi, got lo={v.lo}, hi={v.hi}"
        if v.lo > cap or (v.hi is not None and v.hi > cap):
            return f"lognormal clip must stay <= {cap:g}, got lo={v.lo}, hi={v.hi}"
    return None


def _check_num(t: WorkflowTemplate, fld: str, v: Any, cap: float = MAX_SECONDS) -> None:
    problem = quantity_problem(v, cap)
    if problem is not None:
        raise _err(t, fld, problem)


def _num_estimate(v: Num) -> float:
    return float(v) if isinstance(v, float | int) else v.estimate


def _check_tokens(t: WorkflowTemplate, fld: str, v: Any) -> None:
    if isinstance(v, bool):
        raise _err(t, fld, f"expected a token count or a token distribution, got {v!r}")
    if isinstance(v, int):
        if not 0 <= v <= MAX_TOKENS:
            raise _err(t, fld, f"token count must be in [0, {MAX_TOKENS}], got {short_repr(v)}")
        return
    if not isinstance(v, TokenSpec):
        raise _err(t, fld, f"expected a token count or a token distribution, got {v!r}")
    dists = token_dists()
    if v.dist not in dists:
        raise _err(t, fld, f"unknown token distribution {v.dist!r}; known: {sorted(dists)}")
    if not (math.isfinite(v.scale) and 0 < v.scale <= MAX_TOKEN_SCALE):
        raise _err(t, fld, f"scale must be in (0, {MAX_TOKEN_SCALE:g}], got {v.scale}")
    if isinstance(v.lo, bool) or not isinstance(v.lo, int) or not 0 <= v.lo <= MAX_TOKENS:
        raise _err(t, fld, f"lo must be an integer in [0, {MAX_TOKENS}], got {short_repr(v.lo)}")
    if v.hi is not None and (isinstance(v.hi, bool) or not isinstance(v.hi, int) or v.hi < v.lo):
        raise _err(t, fld, f"hi must be an integer >= lo, got {short_repr(v.hi)}")
    largest = v.hi if v.hi is not None else dists[v.dist].quantile(1.0) * v.scale
    if largest > MAX_TOKENS:
        raise _err(
            t,
            fld,
            f"draws may reach {largest:.4g} tokens; at most {MAX_TOKENS} (lower hi or scale)",
        )


def _token_estimate(v: Tokens) -> int:
    if isinstance(v, int):
        return v
    est = int(round(token_dists()[v.dist].median * v.scale))
    est = max(est, v.lo)
    return est if v.hi is None else min(est, v.hi)


def _check_width(t: WorkflowTemplate, fld: str, w: Any) -> int:
    """Validate a fan-out width; returns its maximum."""
    if isinstance(w, bool):
        raise _err(t, fld, f"expected an integer width or distribution, got {w!r}")
    cap = MAX_FANOUT_WIDTH
    if isinstance(w, int):
        if not 1 <= w <= cap:
            raise _err(t, fld, f"width must be in [1, {cap}], got {short_repr(w)}")
        return w
    if isinstance(w, UniformInt):
        if w.lo < 1 or w.hi < w.lo or w.hi > cap:
            raise _err(
                t,
                fld,
                f"uniform width needs 1 <= lo <= hi <= {cap}, "
                f"got [{short_repr(w.lo)}, {short_repr(w.hi)}]",
            )
        return w.hi
    if isinstance(w, Pmf):
        if not w.values or len(w.values) != len(w.probs):
            raise _err(t, fld, "pmf needs as many probs as values, at least one")
        if min(w.values) < 1 or max(w.values) > cap:
            raise _err(
                t, fld, f"pmf values must be in [1, {cap}], got {short_repr(list(w.values))}"
            )
        _check_probs(t, fld + ".probs", w.probs)
        return max(w.values)
    raise _err(t, fld, f"expected an integer width or distribution, got {w!r}")


def _check_probs(t: WorkflowTemplate, fld: str, probs: Sequence[float]) -> None:
    if any(not math.isfinite(p) or p < 0 for p in probs):
        raise _err(t, fld, f"probabilities must be >= 0, got {list(probs)}")
    if abs(sum(probs) - 1.0) > 1e-6:
        raise _err(t, fld, f"probabilities must sum to 1, got {sum(probs):.6g}")


def _check_session_fields(t: WorkflowTemplate, f: str, task: TaskTemplate) -> None:
    """Prefix identity and session label: LLM tasks only, a prefix needs an id."""
    p = task.prefix_tokens
    if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= MAX_TOKENS:
        raise _err(t, f + ".prefix_tokens", f"must be an integer in [0, {MAX_TOKENS}], got {p!r}")
    for name in ("prefix_id", "session"):
        v = getattr(task, name)
        if v is None:
            continue
        if task.kind != "llm":
            raise _err(t, f"{f}.{name}", "only llm tasks carry a prefix or a session")
        if not isinstance(v, str) or not v:
            raise _err(t, f"{f}.{name}", f"must be a non-empty string, got {v!r}")
    if task.prefix_id is None and (p or task.session is not None):
        raise _err(
            t, f + ".prefix_id", "prefix_tokens and session need a prefix_id (the application)"
        )
    a = task.agreement
    if a is not None:
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0 <= a < 1:
            raise _err(t, f + ".agreement", f"must be a probability in [0, 1), got {a!r}")
        if task.session is None:
            raise _err(t, f + ".agreement", "only session calls re-sample from a shared context")
        if not isinstance(task.prompt_tokens, int) or isinstance(task.prompt_tokens, bool):
            raise _err(
                t,
                f + ".agreement",
                "branches replay a shared prompt: prompt_tokens must be a fixed count",
            )


@dataclass(slots=True)
class _Compiling:
    """What the compile steps share: the template, its task index and graph, and which
    rule body each task belongs to (filled by :func:`_claim_rule_bodies`)."""

    t: WorkflowTemplate
    index: dict[str, int]
    g: Any
    """The template's DAG over task indices (a networkx DiGraph)."""
    member: list[int]
    rule_of: list[int]
    option_of: list[int]
    max_copies: list[int]
    """Most copies a realisation may make of each task (fan-out width, loop iterations)."""
    in_option: set[int] = field(default_factory=set)
    """Tasks some branch may drop (set once every rule body is claimed)."""

    @property
    def n(self) -> int:
        return len(self.t.tasks)

    def claim(self, task_id: Any, fld: str, kind: int, r: int, opt: int = -1) -> int:
        """Put a task in a rule body; rules don't nest, so a task is claimed once."""
        if not isinstance(task_id, str) or task_id not in self.index:
            raise _err(self.t, fld, f"unknown task id {task_id!r}")
        i = self.index[task_id]
        if self.member[i] != _STATIC:
            raise _err(
                self.t,
                fld,
                f"task {task_id!r} already belongs to rules[{self.rule_of[i]}] (rules don't nest)",
            )
        self.member[i], self.rule_of[i], self.option_of[i] = kind, r, opt
        return i

    def reaches(self, dec: int, targets: Sequence[int], allowed_extra: set[int]) -> bool:
        """Whether ``dec`` is an ancestor of every target through tasks no branch can drop
        (and ``allowed_extra``), so it stays one whatever the branches choose."""
        import networkx as nx

        keep = [x for x in range(self.n) if x not in self.in_option or x in allowed_extra]
        sub = self.g.subgraph(keep)
        if dec not in sub:
            return False
        desc = nx.descendants(sub, dec)
        return all(x in desc for x in targets)

    def convex(self, body: set[int]) -> bool:
        """Whether no path leaves ``body`` and comes back (a body copied as a whole)."""
        import networkx as nx

        down: set[int] = set()
        for b in body:
            down |= nx.descendants(self.g, b)
        outside = down - body
        return not any(nx.descendants(self.g, o) & body for o in outside)


def _compile(t: WorkflowTemplate) -> _Plan:
    """Validate ``t`` (InputError naming the field) and precompute what :func:`realize`
    needs, so realising runs on integer plans and plain lists only."""
    index = _check_tasks(t)
    n = len(t.tasks)
    c = _Compiling(t, index, _task_graph(t, index), [_STATIC] * n, [-1] * n, [-1] * n, [1] * n)
    _claim_rule_bodies(c)
    c.in_option = {i for i in range(n) if c.member[i] == _BRANCH}
    rules_plan, loop_entries = _check_rules(c)
    static_rb = _static_reveals(c)
    blocks = _block_order(c)
    _check_realised_size(t, index, c.member, c.rule_of, c.max_copies)
    tplans = [_task_plan(task) for task in t.tasks]
    return _Plan(
        tasks=tplans,
        member=c.member,
        rule_of=c.rule_of,
        option_of=c.option_of,
        static_rb=static_rb,
        blocks=blocks,
        copy_ids=_copy_ids(c),
        edges=_edges_plan(c),
        u_is_loop=[m == _LOOP for m in c.member],
        rules=rules_plan,
        loop_entries=loop_entries,
        orphan_dec=_orphan_deciders(c),
        has_sessions=any(p.prefix_id is not None or p.session is not None for p in tplans),
        has_replays=any(p.agreement is not None for p in tplans),
    )


def _check_tasks(t: WorkflowTemplate) -> dict[str, int]:
    """The name and every task's own fields; returns the index of each task id."""
    if not isinstance(t.name, str) or not t.name:
        raise _err(t, "name", "must be a non-empty string")
    if not t.tasks:
        raise _err(t, "tasks", "a workflow needs at least one task")
    index: dict[str, int] = {}
    models = known_models()
    for i, task in enumerate(t.tasks):
        f = f"tasks[{i}]"
        if not isinstance(task, TaskTemplate):
            raise _err(t, f, f"expected a TaskTemplate, got {type(task).__name__}")
        if not isinstance(task.id, str) or not task.id:
            raise _err(t, f + ".id", "must be a non-empty string")
        if task.id in index:
            raise _err(t, f + ".id", f"duplicate task id {task.id!r}")
        index[task.id] = i
        if task.kind not in KNOWN_KINDS:
            raise _err(t, f + ".kind", f"unknown kind {task.kind!r}; known: {list(KNOWN_KINDS)}")
        if task.kind == "llm":
            _check_llm_fields(t, f, task, models)
        else:
            _check_tool_field(t, f, task)
        _check_session_fields(t, f, task)
        _check_num(t, f + ".cpu_work", task.cpu_work)
        _check_num(t, f + ".ext_latency", task.ext_latency)
        if task.ext_latency_est is not None:
            _check_num(t, f + ".ext_latency_est", task.ext_latency_est)
    return index


def _check_llm_fields(
    t: WorkflowTemplate, f: str, task: TaskTemplate, models: tuple[str, ...]
) -> None:
    """An LLM call names a known model and valid token counts."""
    if task.model not in models:
        raise _err(t, f + ".model", f"unknown model {task.model!r}; known: {list(models)}")
    _check_tokens(t, f + ".prompt_tokens", task.prompt_tokens)
    _check_tokens(t, f + ".output_tokens", task.output_tokens)
    est = task.output_tokens_est
    if est is not None and (
        isinstance(est, bool) or not isinstance(est, int) or not 0 <= est <= MAX_TOKENS
    ):
        raise _err(
            t,
            f + ".output_tokens_est",
            f"must be an integer in [0, {MAX_TOKENS}], got {short_repr(est)}",
        )


def _check_tool_field(t: WorkflowTemplate, f: str, task: TaskTemplate) -> None:
    """A tool task names its tool, or a choice of named, positively weighted tools."""
    if task.tool is None or task.tool == "":
        raise _err(t, f + ".tool", "a tool task needs a tool name or a tool choice")
    if isinstance(task.tool, ToolChoice):
        if not task.tool.options:
            raise _err(t, f + ".tool", "a tool choice needs at least one option")
        for k, opt in enumerate(task.tool.options):
            of = f"{f}.tool.options[{k}]"
            if not isinstance(opt.name, str) or not opt.name:
                raise _err(t, of + ".name", "must be a non-empty string")
            if not (math.isfinite(opt.weight) and opt.weight > 0):
                raise _err(t, of + ".weight", f"must be > 0, got {opt.weight}")
            if opt.cpu_work is not None:
                _check_num(t, of + ".cpu_work", opt.cpu_work)
            if opt.ext_latency is not None:
                _check_num(t, of + ".ext_latency", opt.ext_latency)
    elif not isinstance(task.tool, str):
        raise _err(t, f + ".tool", f"expected a tool name or ToolChoice, got {task.tool!r}")


def _task_graph(t: WorkflowTemplate, index: dict[str, int]) -> Any:
    """The edges checked (known ids, no self-loop, no duplicate, no cycle) as a networkx
    DiGraph; ``t.edges`` is put in canonical order on the way."""
    import networkx as nx

    g: Any = nx.DiGraph()
    g.add_nodes_from(range(len(t.tasks)))
    seen_edges: set[tuple[int, int]] = set()
    for k, e in enumerate(t.edges):
        f = f"edges[{k}]"
        if e.src not in index:
            raise _err(t, f + ".src", f"unknown task id {e.src!r}")
        if e.dst not in index:
            raise _err(t, f + ".dst", f"unknown task id {e.dst!r}")
        u, v = index[e.src], index[e.dst]
        if u == v:
            raise _err(t, f, f"self-loop on {e.src!r}")
        if (u, v) in seen_edges:
            raise _err(t, f, f"duplicate edge {e.src!r} -> {e.dst!r}")
        seen_edges.add((u, v))
        _check_num(t, f + ".nbytes", e.nbytes, MAX_BYTES)
        g.add_edge(u, v)
    if not nx.is_directed_acyclic_graph(g):
        cyc = [t.tasks[a].id for a, _ in nx.find_cycle(g)]
        raise _err(t, "edges", f"the graph has a cycle: {' -> '.join(cyc + cyc[:1])}")
    # Canonical edge order (by child, then parent, in task order) so equality survives a
    # round trip through formats that store edges as parent lists.
    edges_sorted = sorted(t.edges, key=lambda e: (index[e.dst], index[e.src]))
    object.__setattr__(t, "edges", tuple(edges_sorted))
    return g


def _claim_rule_bodies(c: _Compiling) -> None:
    """Mark each task with the rule body it belongs to (before any rule is checked, since
    the checks ask which tasks a branch may drop)."""
    t = c.t
    for r, rule in enumerate(t.rules):
        f = f"rules[{r}]"
        if isinstance(rule, FanOut):
            if not rule.body:
                raise _err(t, f + ".body", "a fan-out body needs at least one task")
            for k, tid in enumerate(rule.body):
                c.claim(tid, f"{f}.body[{k}]", _FANOUT, r)
        elif isinstance(rule, Branch):
            if not rule.options:
                raise _err(t, f + ".options", "a branch needs at least one option")
            _check_probs(t, f + ".options", [o.prob for o in rule.options])
            for k, o in enumerate(rule.options):
                for m, tid in enumerate(o.tasks):
                    c.claim(tid, f"{f}.options[{k}].tasks[{m}]", _BRANCH, r, k)
        elif isinstance(rule, Loop):
            if not rule.body:
                raise _err(t, f + ".body", "a loop body needs at least one task")
            for k, tid in enumerate(rule.body):
                c.claim(tid, f"{f}.body[{k}]", _LOOP, r)
        else:
            raise _err(t, f, f"unknown rule type {type(rule).__name__}")


def _check_rules(
    c: _Compiling,
) -> tuple[list[tuple[Any, ...]], dict[int, tuple[int, ...]]]:
    """Each rule's decider and shape; returns the rule plans (in rule order) and each
    loop's entry tasks. Sets ``max_copies`` of every fan-out and loop body task."""
    t, index = c.t, c.index
    rules_plan: list[tuple[Any, ...]] = []
    loop_entries: dict[int, tuple[int, ...]] = {}
    for r, rule in enumerate(t.rules):
        f = f"rules[{r}]"
        if not isinstance(rule.decider, str) or rule.decider not in index:
            raise _err(t, f + ".decider", f"unknown task id {rule.decider!r}")
        d = index[rule.decider]
        if isinstance(rule, FanOut | Branch) and c.member[d] != _STATIC:
            raise _err(
                t,
                f + ".decider",
                f"decider {rule.decider!r} must not itself belong to a rule body",
            )
        if isinstance(rule, FanOut):
            rules_plan.append(_check_fanout(c, f, rule, d))
        elif isinstance(rule, Branch):
            rules_plan.append(_check_branch(c, f, rule, d))
        else:
            plan, loop_entries[r] = _check_loop(c, f, r, rule, d)
            rules_plan.append(plan)
    return rules_plan, loop_entries


def _check_fanout(c: _Compiling, f: str, rule: FanOut, d: int) -> tuple[Any, ...]:
    """A fan-out: a valid width, a convex body, a decider that reaches all of it."""
    t, index = c.t, c.index
    wmax = _check_width(t, f + ".width", rule.width)
    body = [index[x] for x in rule.body]
    if not c.convex(set(body)):
        raise _err(
            t,
            f + ".body",
            "the body must be a convex sub-DAG (no path leaves it and comes back)",
        )
    if not c.reaches(d, body, set()):
        raise _err(
            t,
            f + ".decider",
            f"decider {rule.decider!r} must be an ancestor of "
            "every body task (through tasks no branch can drop)",
        )
    for b in body:
        c.max_copies[b] = wmax
    return (_FANOUT, d, rule.width)


def _check_branch(c: _Compiling, f: str, rule: Branch, d: int) -> tuple[Any, ...]:
    """A branch: the decider reaches every task of every option; the plan keeps the
    options' cumulative probabilities."""
    t, index = c.t, c.index
    for k, o in enumerate(rule.options):
        opt_idx = [index[x] for x in o.tasks]
        if opt_idx and not c.reaches(d, opt_idx, set(opt_idx)):
            raise _err(
                t,
                f"{f}.options[{k}]",
                f"decider {rule.decider!r} must be an "
                "ancestor of every task of the option (through static tasks "
                "or tasks of the same option)",
            )
    cum: list[float] = []
    acc = 0.0
    for o in rule.options:
        acc += o.prob
        cum.append(acc)
    return (_BRANCH, d, tuple(cum))


def _check_loop(
    c: _Compiling, f: str, r: int, rule: Loop, d: int
) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """A loop: its decider a sink of its convex body, valid iteration bounds and carry;
    returns the plan and the body's entries (tasks without a parent in the body)."""
    t, index, g = c.t, c.index, c.g
    if c.member[d] != _LOOP or c.rule_of[d] != r:
        raise _err(t, f + ".decider", f"loop decider {rule.decider!r} must be in the body")
    mi = rule.max_iter
    if isinstance(mi, bool) or not isinstance(mi, int) or not 1 <= mi <= MAX_LOOP_ITER:
        raise _err(
            t,
            f + ".max_iter",
            f"must be an integer in [1, {MAX_LOOP_ITER}], got {short_repr(mi)}",
        )
    cp = rule.continue_prob
    if not (math.isfinite(cp) and 0.0 <= cp <= 1.0):
        raise _err(t, f + ".continue_prob", f"must be in [0, 1], got {cp}")
    _check_num(t, f + ".carry_bytes", rule.carry_bytes, MAX_BYTES)
    body_set = {index[x] for x in rule.body}
    if any(x in body_set for x in g.successors(d)):
        raise _err(
            t,
            f + ".decider",
            f"loop decider {rule.decider!r} must be a sink of the body (no child inside the body)",
        )
    if not c.convex(body_set):
        raise _err(
            t,
            f + ".body",
            "the body must be a convex sub-DAG (no path leaves it and comes back)",
        )
    entries = tuple(
        sorted(b for b in body_set if not any(p in body_set for p in g.predecessors(b)))
    )
    for b in body_set:
        c.max_copies[b] = mi
    return (_LOOP, d, mi, cp, rule.carry_bytes), entries


def _static_reveals(c: _Compiling) -> list[int]:
    """Each static task's ``revealed_by`` as a template index (-1: none), checked to be a
    static ancestor that no branch can cut off."""
    t, index = c.t, c.index
    static_rb = [-1] * c.n
    for i, task in enumerate(t.tasks):
        if task.revealed_by is None:
            continue
        f = f"tasks[{i}].revealed_by"
        if task.revealed_by not in index:
            raise _err(t, f, f"unknown task id {task.revealed_by!r}")
        if c.member[i] != _STATIC:
            raise _err(t, f, "only tasks outside rule bodies may name revealed_by")
        d = index[task.revealed_by]
        if c.member[d] != _STATIC:
            raise _err(t, f, f"{task.revealed_by!r} belongs to a rule body")
        if not c.reaches(d, [i], set()):
            raise _err(t, f, f"{task.revealed_by!r} must be an ancestor of {task.id!r}")
        static_rb[i] = d
    return static_rb


def _block_order(c: _Compiling) -> list[tuple[int, tuple[int, ...]]]:
    """The order tasks are realised in: contract each loop body to one node, sort
    topologically (ties broken by declaration order), expand each loop into its body's
    topological order, so a loop unrolls iteration by iteration in one contiguous run."""
    import networkx as nx

    n, g, member, rule_of = c.n, c.g, c.member, c.rule_of
    node_of = [i if member[i] != _LOOP else n + rule_of[i] for i in range(n)]
    cg: Any = nx.DiGraph()
    cg.add_nodes_from(sorted(set(node_of)))
    for u, v in g.edges:
        if node_of[u] != node_of[v]:
            cg.add_edge(node_of[u], node_of[v])
    first: dict[int, int] = {}
    for i in range(n):
        first.setdefault(node_of[i], i)
    blocks: list[tuple[int, tuple[int, ...]]] = []
    for node in nx.lexicographical_topological_sort(cg, key=lambda x: first[x]):
        if node < n:
            blocks.append((-1, (node,)))
        else:
            r = node - n
            body_nodes = [i for i in range(n) if member[i] == _LOOP and rule_of[i] == r]
            order = list(nx.lexicographical_topological_sort(g.subgraph(body_nodes)))
            blocks.append((r, tuple(order)))
    return blocks


def _copy_ids(c: _Compiling) -> list[list[str]]:
    """The ids of every copy a realisation may make, computed once: ``t#c`` for fan-out
    copies, ``t@j`` for loop iterations after the first."""
    copy_ids: list[list[str]] = []
    for i, task in enumerate(c.t.tasks):
        if c.member[i] == _FANOUT:
            copy_ids.append([f"{task.id}#{k}" for k in range(c.max_copies[i])])
        elif c.member[i] == _LOOP:
            copy_ids.append([task.id] + [f"{task.id}@{j}" for j in range(1, c.max_copies[i])])
        else:
            copy_ids.append([task.id])
    return copy_ids


def _edges_plan(c: _Compiling) -> list[tuple[int, int, Num, int]]:
    """Each template edge with whether it joins copies pairwise (both ends in the same
    fan-out or loop body) or every copy to every copy."""
    member, rule_of = c.member, c.rule_of
    edges_plan: list[tuple[int, int, Num, int]] = []
    for e in c.t.edges:
        u, v = c.index[e.src], c.index[e.dst]
        same = member[u] in (_FANOUT, _LOOP) and member[u] == member[v] and rule_of[u] == rule_of[v]
        edges_plan.append((u, v, e.nbytes, 1 if same else 0))
    return edges_plan


def _orphan_deciders(c: _Compiling) -> list[tuple[int, int]]:
    """Tasks whose parents all sit in branch options, with the decider that becomes their
    parent when the chosen options drop them all."""
    orphan_dec: list[tuple[int, int]] = []
    for i in range(c.n):
        preds = sorted(c.g.predecessors(i))
        if preds and all(c.member[p] == _BRANCH for p in preds):
            first_rule = c.t.rules[c.rule_of[preds[0]]]
            orphan_dec.append((i, c.index[first_rule.decider]))
    return orphan_dec


def _check_realised_size(
    t: WorkflowTemplate,
    index: dict[str, int],
    member: list[int],
    rule_of: list[int],
    max_copies: list[int],
) -> None:
    """The largest realisation (every fan-out and loop at its maximum) must stay buildable."""
    tasks = sum(max_copies)
    if tasks > MAX_REALISED_TASKS:
        raise _err(
            t,
            "rules",
            f"a realisation may have {tasks} tasks (fan-out widths x loop iterations); at most "
            f"{MAX_REALISED_TASKS}: lower a width or maxIter",
        )
    edges = 0
    for e in t.edges:
        u, v = index[e.src], index[e.dst]
        if member[u] in (_FANOUT, _LOOP) and (member[u], rule_of[u]) == (member[v], rule_of[v]):
            edges += max_copies[u]
        else:
            edges += (1 if member[u] == _LOOP else max_copies[u]) * max_copies[v]
    if edges > MAX_REALISED_EDGES:
        raise _err(
            t,
            "rules",
            f"a realisation may have {edges} edges (fan-outs feeding fan-outs); at most "
            f"{MAX_REALISED_EDGES}: lower a width",
        )


def _token_plan(v: Tokens) -> tuple[int, TokenDist | None, tuple[float, int, int | None]]:
    if isinstance(v, int):
        return v, None, (1.0, 0, None)
    return 0, token_dists()[v.dist], (v.scale, v.lo, v.hi)


def _task_plan(task: TaskTemplate) -> _TaskPlan:
    pf, pd, pa = _token_plan(task.prompt_tokens)
    of, od, oa = _token_plan(task.output_tokens)
    if task.kind == "llm":
        out_est = (
            task.output_tokens_est
            if task.output_tokens_est is not None
            else _token_estimate(task.output_tokens)
        )
    else:
        out_est = 0
    ext_est = (
        float(task.ext_latency_est)
        if task.ext_latency_est is not None
        else _num_estimate(task.ext_latency)
    )
    names: tuple[str, ...] = ()
    cum: tuple[float, ...] = ()
    cpus: tuple[Num, ...] = ()
    exts: tuple[Num, ...] = ()
    ext_ests: tuple[float, ...] = ()
    tool: str | None = None
    if isinstance(task.tool, ToolChoice):
        total = sum(o.weight for o in task.tool.options)
        acc = 0.0
        c: list[float] = []
        for o in task.tool.options:
            acc += o.weight / total
            c.append(acc)
        c[-1] = 1.0
        names = tuple(o.name for o in task.tool.options)
        cum = tuple(c)
        cpus = tuple(
            o.cpu_work if o.cpu_work is not None else task.cpu_work for o in task.tool.options
        )
        exts = tuple(
            o.ext_latency if o.ext_latency is not None else task.ext_latency
            for o in task.tool.options
        )
        ext_ests = tuple(
            _num_estimate(o.ext_latency) if o.ext_latency is not None else ext_est
            for o in task.tool.options
        )
    else:
        tool = task.tool
    return _TaskPlan(
        id=task.id,
        kind=task.kind,
        model=task.model if task.kind == "llm" else None,
        prompt_fixed=pf,
        prompt_dist=pd,
        prompt_args=pa,
        output_fixed=of,
        output_dist=od,
        output_args=oa,
        output_est=out_est,
        tool=tool,
        tool_names=names,
        tool_cum=cum,
        tool_cpu=cpus,
        tool_ext=exts,
        tool_ext_est=ext_ests,
        cpu_work=task.cpu_work,
        ext_latency=task.ext_latency,
        ext_est=ext_est,
        role=task.role,
        hint=task.difficulty_hint,
        prefix_id=task.prefix_id,
        prefix_tokens=task.prefix_tokens,
        session=task.session,
        agreement=task.agreement,
    )


# --------------------------------------------------------------------------- realisation


def _draw(v: Num, rng: np.random.Generator) -> float:
    if isinstance(v, float):
        return v
    return v.sample(rng)


def _make_task(
    tp: _TaskPlan,
    tid: str,
    rng: np.random.Generator,
    revealed_by: int | None,
    hints: np.random.Generator,
) -> TaskInstance:
    """One task: its truth from ``rng``, its difficulty hint's noise from ``hints``."""
    if tp.kind == "llm":
        if tp.prompt_dist is None:
            prompt = tp.prompt_fixed
        else:
            s, lo, hi = tp.prompt_args
            prompt = tp.prompt_dist.sample(rng, s, lo, hi)
        if tp.output_dist is None:
            out = tp.output_fixed
        else:
            s, lo, hi = tp.output_args
            out = tp.output_dist.sample(rng, s, lo, hi)
        return TaskInstance(
            id=tid,
            kind="llm",
            model=tp.model,
            prompt_tokens=prompt,
            output_tokens=out,
            output_tokens_est=tp.output_est,
            cpu_work=_draw(tp.cpu_work, rng),
            ext_latency=_draw(tp.ext_latency, rng),
            ext_latency_est=tp.ext_est,
            revealed_by=revealed_by,
            role=tp.role,
            difficulty_hint=llm_hint(out, tp.output_est, hints) if tp.hint is None else tp.hint,
        )
    if tp.tool is not None:
        cpu = _draw(tp.cpu_work, rng)
        ext = _draw(tp.ext_latency, rng)
        return TaskInstance(
            id=tid,
            kind="tool",
            tool=tp.tool,
            cpu_work=cpu,
            ext_latency=ext,
            ext_latency_est=tp.ext_est,
            revealed_by=revealed_by,
            difficulty_hint=tool_hint(ext, tp.ext_est, hints) if tp.hint is None else tp.hint,
        )
    k = bisect_right(tp.tool_cum, float(rng.random()))
    if k >= len(tp.tool_names):
        k = len(tp.tool_names) - 1
    cpu = _draw(tp.tool_cpu[k], rng)
    ext = _draw(tp.tool_ext[k], rng)
    return TaskInstance(
        id=tid,
        kind="tool",
        tool=tp.tool_names[k],
        cpu_work=cpu,
        ext_latency=ext,
        ext_latency_est=tp.tool_ext_est[k],
        revealed_by=revealed_by,
        difficulty_hint=(tool_hint(ext, tp.tool_ext_est[k], hints) if tp.hint is None else tp.hint),
    )


def draw_loop_iterations(max_iter: int, continue_prob: float, rng: np.random.Generator) -> int:
    """Iterations of a loop: 1, then one more with probability ``continue_prob`` each time,
    at most ``max_iter``."""
    k = 1
    while k < max_iter and float(rng.random()) < continue_prob:
        k += 1
    return k


def _template_of(copies: list[list[int]], n_out: int) -> list[int]:
    """The template task each realised task is a copy of."""
    of = [0] * n_out
    for t, cs in enumerate(copies):
        for c in cs:
            of[c] = t
    return of


def realize(
    template: WorkflowTemplate, rng: np.random.Generator, name: str | None = None
) -> WorkflowInstance:
    """Draw every dynamic outcome of ``template`` with ``rng`` and build the concrete DAG.

    Draw order (fixed, so a seed fixes the instance): rule outcomes in rule order, then
    task attributes in output order, then edge payloads in template edge order. Difficulty
    hints draw from a generator spawned from ``rng`` (:mod:`scalesched.workload.hints`), and
    the replay marks of re-sampled branches from one keyed off it
    (:func:`scalesched.workload.sessions.replay_rng`), so they change none of these draws.
    """
    plan = template._plan
    hints = hint_rng(rng)
    outcome = _draw_outcomes(plan, rng)  # 1. fan-out widths, branch options, loop iterations
    out, copies = _realise_tasks(plan, outcome, rng, hints)  # 2. tasks, in output order
    links = _Links.empty(len(out))  # 3. edges
    _link_template_edges(plan, copies, links, rng)
    _link_loop_carries(plan, outcome, copies, links, rng)
    _link_orphans(plan, copies, links)
    tplans = plan.tasks
    parent_lists = tuple(tuple(sorted(p)) for p in links.parents)
    if plan.has_sessions:  # 4. prefixes and session contexts (no draws)
        from scalesched.workload.sessions import link_sessions

        of = _template_of(copies, len(out))
        out = link_sessions(out, parent_lists, [tplans[t] for t in of])
    if plan.has_replays:  # 5. re-sampled branches (a generator of their own)
        from scalesched.workload.sessions import mark_replays, replay_rng

        groups = [(p.agreement, copies[t]) for t, p in enumerate(tplans) if p.agreement is not None]
        out = mark_replays(out, groups, replay_rng(rng))
    return WorkflowInstance(
        name=name if name is not None else template.name,
        pattern=template.pattern,
        tasks=tuple(out),
        parents=parent_lists,
        children=tuple(tuple(sorted(c)) for c in links.children),
        edge_bytes=links.edge_bytes,
    )


def _draw_outcomes(plan: _Plan, rng: np.random.Generator) -> list[int]:
    """Each rule's outcome, in rule order: a fan-out's width, the index of the branch
    option kept, a loop's iterations."""
    outcome: list[int] = []
    for rp in plan.rules:
        kind = rp[0]
        if kind == _FANOUT:
            w = rp[2]
            outcome.append(w if isinstance(w, int) else w.sample(rng))
        elif kind == _BRANCH:
            k = bisect_right(rp[2], float(rng.random()))
            outcome.append(min(k, len(rp[2]) - 1))
        else:
            outcome.append(draw_loop_iterations(rp[2], rp[3], rng))
    return outcome


def _realise_tasks(
    plan: _Plan, outcome: list[int], rng: np.random.Generator, hints: np.random.Generator
) -> tuple[list[TaskInstance], list[list[int]]]:
    """The realised tasks in output order (block by block, loops unrolled), and for each
    template task the output indices of its copies."""
    member = plan.member
    rule_of = plan.rule_of
    tplans = plan.tasks
    copy_ids = plan.copy_ids
    copies: list[list[int]] = [[] for _ in tplans]
    out: list[TaskInstance] = []
    append = out.append
    for r, body in plan.blocks:
        if r < 0:
            t = body[0]
            m = member[t]
            tp = tplans[t]
            if m == _STATIC:
                sr = plan.static_rb[t]
                copies[t].append(len(out))
                append(_make_task(tp, tp.id, rng, copies[sr][0] if sr >= 0 else None, hints))
            elif m == _FANOUT:
                ru = rule_of[t]
                dec = copies[plan.rules[ru][1]][0]
                ids = copy_ids[t]
                ct = copies[t]
                for c in range(outcome[ru]):
                    ct.append(len(out))
                    append(
                        _make_task(tp, ids[c] if c < len(ids) else f"{tp.id}#{c}", rng, dec, hints)
                    )
            else:  # branch option task
                ru = rule_of[t]
                if outcome[ru] == plan.option_of[t]:
                    dec = copies[plan.rules[ru][1]][0]
                    copies[t].append(len(out))
                    append(_make_task(tp, tp.id, rng, dec, hints))
        else:
            dcopies = copies[plan.rules[r][1]]
            for j in range(outcome[r]):
                rb = dcopies[j - 1] if j > 0 else None
                for t in body:
                    copies[t].append(len(out))
                    append(_make_task(tplans[t], copy_ids[t][j], rng, rb, hints))
    return out, copies


@dataclass(slots=True)
class _Links:
    """The realised edges as they are built: parent and child lists per realised task, and
    the payload of each edge that carries one."""

    parents: list[list[int]]
    children: list[list[int]]
    edge_bytes: dict[tuple[int, int], float]

    @classmethod
    def empty(cls, n_out: int) -> _Links:
        return cls([[] for _ in range(n_out)], [[] for _ in range(n_out)], {})


def _link_template_edges(
    plan: _Plan, copies: list[list[int]], links: _Links, rng: np.random.Generator
) -> None:
    """Each template edge between realised copies, payloads drawn in template edge order:
    copy i to copy i inside one body, else every copy to every copy (from a loop body's
    last iteration only)."""
    parents, children, edge_bytes = links.parents, links.children, links.edge_bytes
    u_is_loop = plan.u_is_loop
    for u, v, nb, pairwise in plan.edges:
        cu = copies[u]
        cv = copies[v]
        if not cu or not cv:
            continue
        if pairwise:
            for a, b in zip(cu, cv, strict=True):
                parents[b].append(a)
                children[a].append(b)
                x = nb if isinstance(nb, float) else nb.sample(rng)
                if x > 0.0:
                    edge_bytes[(a, b)] = x
        else:
            srcs = cu[-1:] if u_is_loop[u] else cu
            for a in srcs:
                for b in cv:
                    parents[b].append(a)
                    children[a].append(b)
                    x = nb if isinstance(nb, float) else nb.sample(rng)
                    if x > 0.0:
                        edge_bytes[(a, b)] = x


def _link_loop_carries(
    plan: _Plan,
    outcome: list[int],
    copies: list[list[int]],
    links: _Links,
    rng: np.random.Generator,
) -> None:
    """The edges that carry a loop from one iteration to the next: ``decider@(j-1)`` to
    every entry of iteration ``j``, payloads drawn after the template edges'."""
    parents, children, edge_bytes = links.parents, links.children, links.edge_bytes
    for r, entries in plan.loop_entries.items():
        k = outcome[r]
        if k < 2:
            continue
        carry = plan.rules[r][4]
        dcopies = copies[plan.rules[r][1]]
        for j in range(1, k):
            a = dcopies[j - 1]
            for e in entries:
                b = copies[e][j]
                parents[b].append(a)
                children[a].append(b)
                x = carry if isinstance(carry, float) else carry.sample(rng)
                if x > 0.0:
                    edge_bytes[(a, b)] = x


def _link_orphans(plan: _Plan, copies: list[list[int]], links: _Links) -> None:
    """A kept task whose parents were all dropped by branches gets the branch's decider
    as its only parent (no payload, no draw)."""
    parents, children = links.parents, links.children
    for t, d in plan.orphan_dec:
        for b in copies[t]:
            if not parents[b]:
                a = copies[d][0]
                parents[b].append(a)
                children[a].append(b)
