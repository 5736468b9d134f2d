"""Presets that exercise KV state: agent sessions, shared application prompts and branches
that re-sample from a common point (docs/cache.md, "Workloads").

Every LLM call carries a prefix identity (:mod:`scalesched.workload.sessions`): the
application prompt it starts with (``prefix_id``, ``prefix_tokens``) and, inside a session,
the earlier call whose context it extends. The token counts below are each call's *own*
tokens; the realised prompt adds the application prompt or the session context.

=================== ============================================================= ======
preset              structure                                                      tasks
=================== ============================================================= ======
tool-heavy          plan(70b) -> loop{tool (long, variable pause) -> step(70b)}     4-18
                    (1..8 steps, continue 0.75) -> answer(70b); one session, app
                    prompt 1200 tokens
coordinator         lead(70b) -> loop{2 workers(7b) -> tools -> lead(70b)}          7-62
                    (1..12 rounds, continue 0.8) -> final(70b); the lead is one
                    session re-entered every round (app prompt 1024); workers are
                    fresh calls sharing a 768-token worker prompt
best-of-n           pose(7b) -> fan-out 4..16 sample(7b) -> verify(70b); samples    6-18
                    extend pose's context (app prompt 1024)
self-consistency    pose(7b) -> fan-out 5..20 path(7b, long reasoning) ->           7-22
                    vote(phi-2); paths extend pose's context (app prompt 1024)
tree-of-thought     root(70b) -> fan-out 2..4 expand(70b) -> evaluate(70b) ->       7-11
                    fan-out 2..4 expand(70b) -> final(70b); one session: each
                    level extends the chosen thought (app prompt 1024)
test-time-scaling   best-of-n 40%, self-consistency 35%, tree-of-thought 25%
agent-mix           tool-heavy 40%, coordinator 30%, test-time-scaling 30%
=================== ============================================================= ======

Tool pauses of ``tool-heavy`` (external latency, lognormal median / sigma / clip, seconds):
web search 2.0 / 0.8 / [0.2, 30], database 1.0 / 0.7 / [0.1, 20], sandboxed code
(1.0 core-s of CPU, then 1.0 / 0.6 / [0.2, 10]), retrieval (0.4 core-s, no pause).
``pose`` is the shared point itself: one call that prefills the problem and writes a short
stem (1-32 tokens) that every branch continues.

The pattern labels are not in :data:`scalesched.workload.patterns.PATTERNS` (whose names
size the duration predictor's inputs); :func:`scalesched.workload.source.get_workload`
finds them here.
"""

from __future__ import annotations

from collections.abc import Callable

from scalesched.workload.patterns import (
    QUERY,
    TEXT,
    TOOL_RESULT,
    Generator,
    fixed_pattern,
    weighted_mix,
)
from scalesched.workload.roles import TOOL_PROFILES, choice_task
from scalesched.workload.template import (
    Edge,
    FanOut,
    LogNormal,
    Loop,
    TaskTemplate,
    TokenSpec,
    ToolChoice,
    ToolOption,
    UniformInt,
    WorkflowTemplate,
)

BIG, SMALL, TINY = "llama-2-70b", "llama-2-7b", "phi-2"


def _call(
    id: str,
    model: str,
    own: TokenSpec | int,
    out: TokenSpec,
    prefix: tuple[str, int],
    session: str | None = None,
    role: str = "reasoner",
    agreement: float | None = None,
) -> TaskTemplate:
    """An LLM call drawing ``own`` prompt tokens after its application prompt or context."""
    return TaskTemplate(
        id=id,
        kind="llm",
        model=model,
        role=role,
        prompt_tokens=own,
        output_tokens=out,
        prefix_id=prefix[0],
        prefix_tokens=prefix[1],
        session=session,
        agreement=agreement,
    )


def _e(src: str, dst: str, nbytes: float | LogNormal = TEXT) -> Edge:
    return Edge(src, dst, nbytes)


LONG_TOOLS = ToolChoice(
    (
        ToolOption(
            "web_search", 0.35, LogNormal(0.08, 0.4, 0.05, 0.5), LogNormal(2.0, 0.8, 0.2, 30.0)
        ),
        ToolOption(
            "db_query", 0.25, LogNormal(0.1, 0.5, 0.05, 1.0), LogNormal(1.0, 0.7, 0.1, 20.0)
        ),
        ToolOption(
            "code_exec", 0.25, LogNormal(1.0, 0.8, 0.05, 10.0), LogNormal(1.0, 0.6, 0.2, 10.0)
        ),
        ToolOption("retrieval", 0.15, TOOL_PROFILES["retrieval"].cpu_work, 0.0),
    )
)
"""Tools with long, variable pauses (see the module docstring)."""

OBSERVATION = TokenSpec("conv_prompt", 0.25, 16, 768)
"""A tool result read back into the session."""
THOUGHT = TokenSpec("conv_output", 0.6, 16, 384)


def tool_heavy(max_steps: int = 8, continue_prob: float = 0.75) -> WorkflowTemplate:
    """One agent session on a large model alternating thoughts and slow tool calls."""
    app = ("tool-heavy/agent", 1200)
    tasks = (
        _call("plan", BIG, TokenSpec("conv_prompt", 0.3, 32, 1024), THOUGHT, app, "agent"),
        TaskTemplate(id="act", kind="tool", tool=LONG_TOOLS),
        _call("step", BIG, OBSERVATION, THOUGHT, app, "agent"),
        _call(
            "answer",
            BIG,
            TokenSpec("conv_prompt", 0.05, 8, 128),
            TokenSpec("conv_output", 1.0, 16, 512),
            app,
            "agent",
            "answer",
        ),
    )
    edges = (
        _e("plan", "act", QUERY),
        _e("act", "step", TOOL_RESULT),
        _e("step", "answer"),
    )
    rules = (Loop("step", ("act", "step"), max_steps, continue_prob, QUERY),)
    return WorkflowTemplate(
        "tool-heavy", tasks, edges, rules, description="one agent session, slow tools"
    )


def coordinator(max_rounds: int = 12, continue_prob: float = 0.8) -> WorkflowTemplate:
    """A lead agent re-entered every round after two workers ran their tools."""
    lead, worker = ("coordinator/lead", 1024), ("coordinator/worker", 768)
    report = TokenSpec("conv_prompt", 0.15, 16, 512)
    short = TokenSpec("conv_output", 0.4, 8, 256)
    tasks: list[TaskTemplate] = [
        _call("open", BIG, TokenSpec("conv_prompt", 0.3, 32, 1024), short, lead, "lead", "planner")
    ]
    for w in ("wa", "wb"):
        tasks.append(
            _call(w, SMALL, TokenSpec("conv_prompt", 0.5, 32, 1536), short, worker, role="worker")
        )
        tasks.append(choice_task(f"t{w}", {"web_search": 0.5, "db_query": 0.3, "retrieval": 0.2}))
    tasks.append(_call("lead", BIG, report, short, lead, "lead", "planner"))
    tasks.append(
        _call("final", BIG, report, TokenSpec("conv_output", 1.0, 16, 512), lead, "lead", "answer")
    )
    edges = (
        _e("open", "wa", QUERY),
        _e("open", "wb", QUERY),
        _e("wa", "twa", QUERY),
        _e("wb", "twb", QUERY),
        _e("twa", "lead", TOOL_RESULT),
        _e("twb", "lead", TOOL_RESULT),
        _e("lead", "final"),
    )
    rules = (Loop("lead", ("wa", "twa", "wb", "twb", "lead"), max_rounds, continue_prob, QUERY),)
    return WorkflowTemplate(
        "coordinator", tuple(tasks), edges, rules, description="lead agent re-entered per round"
    )


BRANCH_AGREEMENT = 0.9
"""Per-token probability that a branch keeps to its group's first path (``agreement`` of the
sample, path and expand calls): an assumption, not a measurement. Two samples from one
point pick the same token with the distribution's collision probability (sum of p^2): near
1 on formulaic tokens, low at real choices. 0.9 makes the mean shared run 9 tokens; the
logits-cache study varies it (docs/cache.md, "Logits cache")."""

PROBLEM = TokenSpec("conv_prompt", 1.0, 64, 2048)
STEM = TokenSpec("conv_output", 0.1, 1, 32)


def best_of_n(
    lo: int = 4, hi: int = 16, agreement: float | None = BRANCH_AGREEMENT
) -> WorkflowTemplate:
    """n samples continue one posed problem; a large model picks the best."""
    app = ("tts/solver", 1024)
    tasks = (
        _call("pose", SMALL, PROBLEM, STEM, app, "s"),
        _call(
            "sample",
            SMALL,
            8,
            TokenSpec("conv_output", 1.5, 32, 1024),
            app,
            "s",
            "answer",
            agreement,
        ),
        _call(
            "verify",
            BIG,
            TokenSpec("conv_prompt", 1.0, 64, 1536),
            TokenSpec("conv_output", 0.1, 1, 32),
            ("tts/verifier", 512),
            role="judge",
        ),
    )
    edges = (_e("pose", "sample", QUERY), _e("sample", "verify"))
    rules = (FanOut("pose", ("sample",), UniformInt(lo, hi)),)
    return WorkflowTemplate("best-of-n", tasks, edges, rules, description="best-of-n sampling")


def self_consistency(
    lo: int = 5, hi: int = 20, agreement: float | None = BRANCH_AGREEMENT
) -> WorkflowTemplate:
    """n reasoning paths continue one posed problem; a small model tallies the answers."""
    app = ("tts/solver", 1024)
    tasks = (
        _call("pose", SMALL, PROBLEM, STEM, app, "s"),
        _call(
            "path",
            SMALL,
            8,
            TokenSpec("conv_output", 2.0, 32, 1024),
            app,
            "s",
            agreement=agreement,
        ),
        _call(
            "vote",
            TINY,
            TokenSpec("conv_prompt", 0.5, 32, 1024),
            TokenSpec("conv_output", 0.05, 1, 16),
            ("tts/tally", 256),
            role="voter",
        ),
    )
    edges = (_e("pose", "path", QUERY), _e("path", "vote"))
    rules = (FanOut("pose", ("path",), UniformInt(lo, hi)),)
    return WorkflowTemplate(
        "self-consistency", tasks, edges, rules, description="self-consistency voting"
    )


def tree_of_thought(
    lo: int = 2, hi: int = 4, agreement: float | None = BRANCH_AGREEMENT
) -> WorkflowTemplate:
    """Two levels of thoughts on a large model, each level continuing the evaluated one."""
    app = ("tts/tot", 1024)
    thought = TokenSpec("conv_output", 1.0, 16, 512)
    tasks = (
        _call("root", BIG, PROBLEM, THOUGHT, app, "s"),
        _call("expand", BIG, 16, thought, app, "s", agreement=agreement),
        _call("evaluate", BIG, 64, TokenSpec("conv_output", 0.3, 8, 128), app, "s", "judge"),
        _call("expand2", BIG, 16, thought, app, "s", agreement=agreement),
        _call("final", BIG, 32, TokenSpec("conv_output", 1.0, 16, 512), app, "s", "answer"),
    )
    edges = (
        _e("root", "expand", QUERY),
        _e("expand", "evaluate"),
        _e("evaluate", "expand2", QUERY),
        _e("expand2", "final"),
    )
    rules = (
        FanOut("root", ("expand",), UniformInt(lo, hi)),
        FanOut("evaluate", ("expand2",), UniformInt(lo, hi)),
    )
    return WorkflowTemplate("tree-of-thought", tasks, edges, rules, description="tree of thought")


# --------------------------------------------------------------------------- registry


_BUILDERS: dict[str, Callable[[], WorkflowTemplate]] = {
    "tool-heavy": tool_heavy,
    "coordinator": coordinator,
    "best-of-n": best_of_n,
    "self-consistency": self_consistency,
    "tree-of-thought": tree_of_thought,
}

_MIXES: dict[str, dict[str, float]] = {
    "test-time-scaling": {"best-of-n": 0.40, "self-consistency": 0.35, "tree-of-thought": 0.25},
    "agent-mix": {"tool-heavy": 0.40, "coordinator": 0.30, "test-time-scaling": 0.30},
}


AGENT_PATTERNS: dict[str, Generator] = {
    name: fixed_pattern(builder) for name, builder in _BUILDERS.items()
}
AGENT_PATTERNS.update({name: weighted_mix(w, AGENT_PATTERNS) for name, w in _MIXES.items()})

AGENT_DESCRIPTIONS: dict[str, str] = {
    "tool-heavy": "one agent session (70b) alternating thoughts and slow, variable tool calls "
    "(1-8 steps); KV kept across tool pauses",
    "coordinator": "a lead agent (70b) re-entered every round (1-12) after two 7b workers "
    "ran their tools",
    "best-of-n": "4-16 samples continue one posed problem (shared prefix); a 70b verifier picks",
    "self-consistency": "5-20 reasoning paths continue one posed problem; a vote tallies them",
    "tree-of-thought": "two levels of 2-4 thoughts (70b), each level continuing the evaluated one",
    "test-time-scaling": "best-of-n 40%, self-consistency 35%, tree-of-thought 25%",
    "agent-mix": "tool-heavy 40%, coordinator 30%, test-time-scaling 30%",
}
