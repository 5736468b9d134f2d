"""Preset agentic workflow patterns.

Each pattern is a template builder (``react(max_steps=6, ...) -> WorkflowTemplate``) and an
entry of :data:`PATTERNS`, a generator ``(rng) -> WorkflowTemplate`` that returns one of a
few cached, pre-validated templates (most patterns have a single variant: their
randomness lives in the template's dynamic rules and distributions).

======================= ============================================================ =====
pattern                 structure                                                    tasks
======================= ============================================================ =====
react                   route(phi-2) -> think0(70b) -> loop{act(tool) -> think(70b)}   5-15
                        (1..6 steps, continue 0.65) -> answer(7b)
plan-execute            route(phi-2) -> plan(70b) -> fan-out 2..8 of                  7-19
                        {call(tool) -> interpret(7b)} -> join(70b)
map-reduce              route(phi-2) -> fetch(file_io) -> split(file_io) -> fan-out    7-20
                        3..16 of summarise(7b) -> reduce(70b)
debate                  route(phi-2) -> loop{n agents(7b/34b alternating) ->          5-22
                        judge(70b)} (1..4 rounds, continue 0.5) -> vote(phi-2);
                        n = 2, 3, 4 with weights 0.3, 0.4, 0.3
codegen                 route(phi-2) -> spec(70b) -> loop{code(34b) -> test           5-13
                        (code_exec)} (1..5 tries, continue 0.45) -> explain(7b)
deep-research           route(phi-2) -> plan(70b) -> fan-out 3..8 of                 10-24
                        {search(web_search) -> read(7b)} -> assess(70b) -> branch
                        (0.4: 2 follow-up search -> read pairs; 0.6: none)
                        -> synthesise(70b)
agentic-mix             one of the six per workflow, weights :data:`MIX_WEIGHTS`
======================= ============================================================ =====

Tool choices per step (react ``act``, plan-execute ``call``) are drawn per realised task;
tool magnitudes come from :data:`scalesched.workload.roles.TOOL_PROFILES`, LLM token
shapes from :data:`scalesched.workload.roles.ROLES`.  Payloads (bytes, lognormal): a
query or action ~500 B, an LLM message ~2 KB, a plan ~4 KB, code ~8 KB, a test log
~20 KB, a tool result ~50 KB, a search result page ~120 KB, a chunk ~16 KB, a fetched
document ~2 MB.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from scalesched.workload.roles import choice_task, llm_task, tool_task
from scalesched.workload.template import (
    Branch,
    BranchOption,
    Edge,
    FanOut,
    LogNormal,
    Loop,
    TaskTemplate,
    UniformInt,
    WorkflowTemplate,
)

# Payload sizes in bytes.
QUERY = LogNormal(500.0, 0.5, 50.0, 8e3)
TEXT = LogNormal(2e3, 0.6, 200.0, 64e3)
PLAN = LogNormal(4e3, 0.5, 500.0, 64e3)
CODE = LogNormal(8e3, 0.6, 500.0, 256e3)
TEST_LOG = LogNormal(20e3, 1.0, 1e3, 2e6)
TOOL_RESULT = LogNormal(50e3, 1.0, 1e3, 4e6)
SEARCH_RESULT = LogNormal(120e3, 0.8, 5e3, 4e6)
CHUNK = LogNormal(16e3, 0.4, 2e3, 128e3)
DOCUMENT = LogNormal(2e6, 0.8, 1e5, 32e6)
TRANSCRIPT = LogNormal(6e3, 0.5, 500.0, 128e3)

ACT_TOOLS = {
    "web_search": 0.35,
    "retrieval": 0.25,
    "db_query": 0.15,
    "code_exec": 0.15,
    "file_io": 0.10,
}
CALL_TOOLS = {"web_search": 0.35, "db_query": 0.25, "retrieval": 0.20, "code_exec": 0.20}


def _e(src: str, dst: str, nbytes: float | LogNormal) -> Edge:
    return Edge(src, dst, nbytes)


def react(max_steps: int = 6, continue_prob: float = 0.65) -> WorkflowTemplate:
    """ReAct: a large model alternates thoughts and tool calls, then a worker answers."""
    tasks = (
        llm_task("route", "router"),
        llm_task("think0", "reasoner"),
        choice_task("act", ACT_TOOLS),
        llm_task("think", "reasoner"),
        llm_task("answer", "answer"),
    )
    edges = (
        _e("route", "think0", QUERY),
        _e("think0", "act", QUERY),
        _e("act", "think", TOOL_RESULT),
        _e("think", "answer", TEXT),
    )
    rules = (Loop("think", ("act", "think"), max_steps, continue_prob, QUERY),)
    return WorkflowTemplate("react", tasks, edges, rules, description="ReAct tool loop")


def plan_execute(min_steps: int = 2, max_steps: int = 8) -> WorkflowTemplate:
    """LLMCompiler: a large planner fans out parallel tool calls, each read by a worker,
    and a joiner combines them."""
    tasks = (
        llm_task("route", "router"),
        llm_task("plan", "planner"),
        choice_task("call", CALL_TOOLS),
        llm_task("interpret", "worker"),
        llm_task("join", "joiner"),
    )
    edges = (
        _e("route", "plan", QUERY),
        _e("plan", "call", QUERY),
        _e("call", "interpret", TOOL_RESULT),
        _e("interpret", "join", TEXT),
    )
    rules = (FanOut("plan", ("call", "interpret"), UniformInt(min_steps, max_steps)),)
    return WorkflowTemplate(
        "plan-execute", tasks, edges, rules, description="LLMCompiler plan/execute"
    )


def map_reduce(min_chunks: int = 3, max_chunks: int = 16) -> WorkflowTemplate:
    """Fetch a document, split it, summarise the chunks in parallel, reduce."""
    tasks = (
        llm_task("route", "router"),
        tool_task("fetch", "file_io"),
        tool_task("split", "file_io", cpu_work=LogNormal(0.5, 0.5, 0.1, 3.0), ext_latency=0.0),
        llm_task("summarise", "summariser"),
        llm_task("reduce", "synthesiser"),
    )
    edges = (
        _e("route", "fetch", QUERY),
        _e("fetch", "split", DOCUMENT),
        _e("split", "summarise", CHUNK),
        _e("summarise", "reduce", TEXT),
    )
    rules = (FanOut("split", ("summarise",), UniformInt(min_chunks, max_chunks)),)
    return WorkflowTemplate(
        "map-reduce", tasks, edges, rules, description="map-reduce summarisation"
    )


DEBATE_MODELS = ("llama-2-7b", "codellama-34b")


def debate(agents: int = 3, max_rounds: int = 4, continue_prob: float = 0.5) -> WorkflowTemplate:
    """Multi-agent debate: agents answer in parallel each round, a judge decides whether
    another round is needed, a small model tallies the final vote."""
    names = [f"agent{i}" for i in range(agents)]
    tasks: list[TaskTemplate] = [llm_task("route", "router")]
    tasks += [llm_task(a, "debater", DEBATE_MODELS[i % 2]) for i, a in enumerate(names)]
    tasks += [llm_task("judge", "judge"), llm_task("vote", "voter")]
    edges = [_e("route", a, QUERY) for a in names]
    edges += [_e(a, "judge", TEXT) for a in names]
    edges.append(_e("judge", "vote", TRANSCRIPT))
    rules = (Loop("judge", (*names, "judge"), max_rounds, continue_prob, TRANSCRIPT),)
    return WorkflowTemplate(
        "debate", tuple(tasks), tuple(edges), rules, description=f"{agents}-agent debate"
    )


def codegen(max_tries: int = 5, continue_prob: float = 0.45) -> WorkflowTemplate:
    """Code generation: spec, then code / run tests until they pass, then explain."""
    tasks = (
        llm_task("route", "router"),
        llm_task("spec", "planner"),
        llm_task("code", "coder"),
        tool_task("test", "code_exec", cpu_work=LogNormal(1.5, 0.6, 0.2, 5.0)),
        llm_task("explain", "answer"),
    )
    edges = (
        _e("route", "spec", QUERY),
        _e("spec", "code", PLAN),
        _e("code", "test", CODE),
        _e("code", "explain", CODE),
        _e("test", "explain", TEST_LOG),
    )
    rules = (Loop("test", ("code", "test"), max_tries, continue_prob, TEST_LOG),)
    return WorkflowTemplate(
        "codegen", tasks, edges, rules, description="test-and-fix code generation"
    )


def deep_research(
    min_searches: int = 3, max_searches: int = 8, followup_prob: float = 0.4
) -> WorkflowTemplate:
    """Plan searches, read each result, assess gaps, maybe search again, synthesise."""
    tasks = (
        llm_task("route", "router"),
        llm_task("plan", "planner"),
        tool_task("search", "web_search"),
        llm_task("read", "reader"),
        llm_task("assess", "judge"),
        tool_task("fsearch0", "web_search"),
        llm_task("fread0", "reader"),
        tool_task("fsearch1", "web_search"),
        llm_task("fread1", "reader"),
        llm_task("synthesise", "synthesiser"),
    )
    edges = (
        _e("route", "plan", QUERY),
        _e("plan", "search", QUERY),
        _e("search", "read", SEARCH_RESULT),
        _e("read", "assess", TEXT),
        _e("read", "synthesise", TEXT),
        _e("assess", "fsearch0", QUERY),
        _e("assess", "fsearch1", QUERY),
        _e("fsearch0", "fread0", SEARCH_RESULT),
        _e("fsearch1", "fread1", SEARCH_RESULT),
        _e("fread0", "synthesise", TEXT),
        _e("fread1", "synthesise", TEXT),
        _e("assess", "synthesise", TEXT),
    )
    rules = (
        FanOut("plan", ("search", "read"), UniformInt(min_searches, max_searches)),
        Branch(
            "assess",
            (
                BranchOption(followup_prob, ("fsearch0", "fread0", "fsearch1", "fread1")),
                BranchOption(1.0 - followup_prob, ()),
            ),
        ),
    )
    return WorkflowTemplate("deep-research", tasks, edges, rules, description="deep research")


# --------------------------------------------------------------------------- registry

Generator = Callable[[np.random.Generator], WorkflowTemplate]


@cache
def _single(builder: Callable[[], WorkflowTemplate]) -> WorkflowTemplate:
    return builder()


@cache
def _debate_variants() -> tuple[tuple[float, ...], tuple[WorkflowTemplate, ...]]:
    return (0.3, 0.7, 1.0), (debate(2), debate(3), debate(4))


def fixed_pattern(builder: Callable[[], WorkflowTemplate]) -> Generator:
    """A generator of one fixed template (its dynamic rules draw at realisation)."""

    def gen(rng: np.random.Generator) -> WorkflowTemplate:
        return _single(builder)

    return gen


def _gen_debate(rng: np.random.Generator) -> WorkflowTemplate:
    cum, variants = _debate_variants()
    u = float(rng.random())
    for c, v in zip(cum, variants, strict=True):
        if u < c:
            return v
    return variants[-1]


MIX_WEIGHTS: dict[str, float] = {
    "react": 0.25,
    "plan-execute": 0.20,
    "codegen": 0.15,
    "deep-research": 0.15,
    "map-reduce": 0.15,
    "debate": 0.10,
}
"""Share of each pattern in ``agentic-mix``."""

PATTERNS: dict[str, Generator] = {
    "react": fixed_pattern(react),
    "plan-execute": fixed_pattern(plan_execute),
    "map-reduce": fixed_pattern(map_reduce),
    "debate": _gen_debate,
    "codegen": fixed_pattern(codegen),
    "deep-research": fixed_pattern(deep_research),
}


def weighted_mix(weights: dict[str, float], patterns: dict[str, Generator]) -> Generator:
    """A generator that draws one of ``patterns`` by ``weights`` (one uniform per workflow),
    then lets it build the workflow from the same stream."""
    names = tuple(weights)
    cum = tuple(np.cumsum([weights[k] for k in names]).tolist())

    def gen(rng: np.random.Generator) -> WorkflowTemplate:
        u = float(rng.random())
        for c, name in zip(cum, names, strict=True):
            if u < c:
                return patterns[name](rng)
        return patterns[names[-1]](rng)

    return gen


_gen_mix = weighted_mix(MIX_WEIGHTS, PATTERNS)

PATTERNS["agentic-mix"] = _gen_mix

DESCRIPTIONS: dict[str, str] = {
    "react": "ReAct: router, large model alternating thoughts and tool calls (1-6 steps), answer",
    "plan-execute": "LLMCompiler: large planner, 2-8 parallel tool+worker steps, joiner",
    "map-reduce": "fetch and split a document, summarise 3-16 chunks in parallel, reduce",
    "debate": "2-4 agents debate in rounds (1-4) judged by a large model, final vote",
    "codegen": "spec by a large model, coder + code_exec test-and-fix loop (1-5 tries), explain",
    "deep-research": "plan, 3-8 parallel search+read, assess, maybe a follow-up round, synthesise",
    "agentic-mix": "one of the six patterns per workflow (react 25%, plan-execute 20%, "
    "codegen/deep-research/map-reduce 15% each, debate 10%)",
}
