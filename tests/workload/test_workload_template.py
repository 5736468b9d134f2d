"""Template semantics: fan-out, branch, loop, validation, random templates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from scalesched.errors import InputError
from scalesched.workload.instance import WorkflowInstance
from scalesched.workload.template import (
    Branch,
    BranchOption,
    Edge,
    FanOut,
    LogNormal,
    Loop,
    Pmf,
    TaskTemplate,
    TokenSpec,
    ToolChoice,
    ToolOption,
    Uniform,
    UniformInt,
    WorkflowTemplate,
    realize,
)

Check = Callable[[WorkflowInstance], None]


def tool(tid: str, cpu: float = 1.0) -> TaskTemplate:
    return TaskTemplate(tid, "tool", tool="code_exec", cpu_work=cpu)


def llm(tid: str) -> TaskTemplate:
    return TaskTemplate(
        tid,
        "llm",
        model="llama-2-7b",
        prompt_tokens=TokenSpec("conv_prompt"),
        output_tokens=TokenSpec("conv_output", 0.5, 4, 512),
    )


def pos(w: WorkflowInstance) -> dict[str, int]:
    return {t.id: i for i, t in enumerate(w.tasks)}


def edge_set(w: WorkflowInstance) -> set[tuple[str, str]]:
    return {(w.tasks[u].id, w.tasks[v].id) for v, ps in enumerate(w.parents) for u in ps}


# --------------------------------------------------------------------------- fan-out


def fanout_template(width: object = 3) -> WorkflowTemplate:
    return WorkflowTemplate(
        "fan",
        (tool("a"), tool("d"), tool("x"), llm("y"), tool("z")),
        (
            Edge("a", "d", 10.0),
            Edge("d", "x", 20.0),
            Edge("x", "y", 30.0),
            Edge("y", "z", 40.0),
            Edge("a", "x", 5.0),
        ),
        (FanOut("d", ("x", "y"), width),),  # type: ignore[arg-type]
    )


def test_fanout_copies_body_and_wires_it(check: Check) -> None:
    w = realize(fanout_template(3), np.random.default_rng(0))
    check(w)
    ids = [t.id for t in w.tasks]
    assert ids[:2] == ["a", "d"] and ids[-1] == "z"
    assert sorted(ids[2:-1]) == sorted(f"{b}#{i}" for b in "xy" for i in range(3))
    e = edge_set(w)
    for i in range(3):
        assert ("d", f"x#{i}") in e and ("a", f"x#{i}") in e  # external parents feed every copy
        assert (f"x#{i}", f"y#{i}") in e  # inside the body: copy to same copy
        assert (f"y#{i}", "z") in e  # every copy feeds the external child
        for j in range(3):
            if j != i:
                assert (f"x#{i}", f"y#{j}") not in e
    p = pos(w)
    for t in w.tasks:
        expected = p["d"] if "#" in t.id else None
        assert t.revealed_by == expected
    assert w.edge_bytes[(p["x#1"], p["y#1"])] == 30.0
    assert w.edge_bytes[(p["y#2"], p["z"])] == 40.0


def test_fanout_width_distributions_stay_in_bounds() -> None:
    tpl = fanout_template(UniformInt(2, 5))
    widths = {
        sum(t.id.startswith("x#") for t in realize(tpl, np.random.default_rng(s)).tasks)
        for s in range(60)
    }
    assert widths == {2, 3, 4, 5}
    tpl = fanout_template(Pmf((1, 7), (0.5, 0.5)))
    widths = {
        sum(t.id.startswith("x#") for t in realize(tpl, np.random.default_rng(s)).tasks)
        for s in range(40)
    }
    assert widths == {1, 7}


# --------------------------------------------------------------------------- branch


def branch_template(probs: tuple[float, float, float] = (0.3, 0.3, 0.4)) -> WorkflowTemplate:
    # d decides: option 0 = {p -> q}, option 1 = {r}, option 2 = {} ; z joins everything.
    return WorkflowTemplate(
        "br",
        (tool("a"), tool("d"), tool("p"), tool("q"), tool("r"), tool("s"), tool("z")),
        (
            Edge("a", "d"),
            Edge("d", "p"),
            Edge("p", "q"),
            Edge("d", "r"),
            Edge("q", "s", 8.0),
            Edge("r", "s", 9.0),
            Edge("s", "z"),
        ),
        (
            Branch(
                "d",
                (
                    BranchOption(probs[0], ("p", "q")),
                    BranchOption(probs[1], ("r",)),
                    BranchOption(probs[2], ()),
                ),
            ),
        ),
    )


def test_branch_keeps_only_the_drawn_option(check: Check) -> None:
    seen = set()
    for seed in range(60):
        w = realize(branch_template(), np.random.default_rng(seed))
        check(w)
        ids = frozenset(t.id for t in w.tasks)
        seen.add(ids)
        p = pos(w)
        e = edge_set(w)
        if "p" in ids:
            assert "r" not in ids and "q" in ids
            assert w.tasks[p["p"]].revealed_by == p["d"]
            assert w.tasks[p["q"]].revealed_by == p["d"]
            assert ("q", "s") in e and w.edge_bytes[(p["q"], p["s"])] == 8.0
        elif "r" in ids:
            assert "p" not in ids and "q" not in ids
            assert w.tasks[p["r"]].revealed_by == p["d"]
            assert ("r", "s") in e
        else:
            # s lost all its parents: the decider becomes its parent, with no payload
            assert ("d", "s") in e and (p["d"], p["s"]) not in w.edge_bytes
        assert w.tasks[p["s"]].revealed_by is None
    assert len(seen) == 3


def test_branch_probabilities() -> None:
    tpl = branch_template((0.1, 0.2, 0.7))
    n = 2000
    kinds = [
        frozenset(t.id for t in realize(tpl, np.random.default_rng(s)).tasks) for s in range(n)
    ]
    share_p = sum("p" in k for k in kinds) / n
    share_r = sum("r" in k for k in kinds) / n
    assert abs(share_p - 0.1) < 0.03 and abs(share_r - 0.2) < 0.04


# --------------------------------------------------------------------------- loop


def loop_template(max_iter: int = 4, p: float = 0.7) -> WorkflowTemplate:
    # a -> [b -> c(decider), b -> e] -> z ; e is a second sink of the body
    return WorkflowTemplate(
        "lp",
        (tool("a"), llm("b"), tool("c"), tool("e"), tool("z")),
        (
            Edge("a", "b", 1.0),
            Edge("b", "c", 2.0),
            Edge("b", "e"),
            Edge("c", "z", 3.0),
            Edge("e", "z"),
        ),
        (Loop("c", ("b", "c", "e"), max_iter, p, carry_bytes=LogNormal(100.0, 0.1)),),
    )


def test_loop_unrolls_iterations(check: Check) -> None:
    ks = set()
    for seed in range(80):
        w = realize(loop_template(), np.random.default_rng(seed))
        check(w)
        ids = [t.id for t in w.tasks]
        k = sum(i.startswith("b") for i in ids)
        ks.add(k)
        assert 1 <= k <= 4
        expect = ["a"] + [f"{x}@{j}" if j else x for j in range(k) for x in "bce"] + ["z"]
        assert sorted(ids) == sorted(expect)
        p = pos(w)
        e = edge_set(w)
        last = "" if k == 1 else f"@{k - 1}"
        for j in range(k):
            sfx = f"@{j}" if j else ""
            assert ("a", f"b{sfx}") in e  # outside inputs feed every iteration
            assert (f"b{sfx}", f"c{sfx}") in e and (f"b{sfx}", f"e{sfx}") in e
            if j:
                prev = f"c@{j - 1}" if j > 1 else "c"
                assert (prev, f"b{sfx}") in e  # carried from the previous decider
                assert (p[prev], p[f"b{sfx}"]) in w.edge_bytes
                for x in "bce":
                    assert w.tasks[p[x + sfx]].revealed_by == p[prev]
            else:
                for x in "bce":
                    assert w.tasks[p[x]].revealed_by is None
        # the body leaves from the last iteration only
        assert {u for u, v in e if v == "z"} == {f"c{last}", f"e{last}"}
    assert ks == {1, 2, 3, 4}


def test_loop_iteration_distribution() -> None:
    tpl = loop_template(max_iter=3, p=0.5)
    n = 3000
    ks = [
        sum(t.id.startswith("b") for t in realize(tpl, np.random.default_rng(s)).tasks)
        for s in range(n)
    ]
    frac = [ks.count(k) / n for k in (1, 2, 3)]
    assert abs(frac[0] - 0.5) < 0.04 and abs(frac[1] - 0.25) < 0.04 and abs(frac[2] - 0.25) < 0.04


def test_loop_with_single_task_body(check: Check) -> None:
    tpl = WorkflowTemplate(
        "one", (tool("a"), tool("b")), (Edge("a", "b"),), (Loop("b", ("b",), 5, 1.0),)
    )
    w = realize(tpl, np.random.default_rng(1))
    check(w)
    assert [t.id for t in w.tasks] == ["a", "b", "b@1", "b@2", "b@3", "b@4"]


# --------------------------------------------------------------------------- attributes


def test_estimates_are_not_truth_and_tool_choice() -> None:
    tpl = WorkflowTemplate(
        "attrs",
        (
            llm("l"),
            TaskTemplate(
                "t",
                "tool",
                tool=ToolChoice(
                    (
                        ToolOption("web_search", 1.0, 0.1, LogNormal(0.5, 0.5, 0.2, 2.0)),
                        ToolOption("code_exec", 1.0, Uniform(1.0, 2.0), 0.0),
                    )
                ),
            ),
        ),
        (Edge("l", "t"),),
    )
    outs, tools = set(), set()
    for s in range(100):
        w = realize(tpl, np.random.default_rng(s))
        lt, tt = w.tasks
        outs.add(lt.output_tokens)
        assert 4 <= lt.output_tokens <= 512
        assert lt.output_tokens_est == round(0.5 * 129)  # conv_output median 129 × 0.5
        tools.add(tt.tool)
        if tt.tool == "web_search":
            assert tt.ext_latency_est == 0.5 and 0.2 <= tt.ext_latency <= 2.0 and tt.cpu_work == 0.1
        else:
            assert 1.0 <= tt.cpu_work <= 2.0 and tt.ext_latency == 0.0
    assert len(outs) > 20 and tools == {"web_search", "code_exec"}


def test_realize_is_deterministic() -> None:
    tpl = loop_template()
    a = realize(tpl, np.random.default_rng(42))
    b = realize(tpl, np.random.default_rng(42))
    assert a == b


# --------------------------------------------------------------------------- validation


def bad(fld: str, **kw: object) -> None:
    base: dict[str, object] = {
        "name": "bad",
        "tasks": (tool("a"), tool("b"), tool("c")),
        "edges": (Edge("a", "b"), Edge("b", "c")),
        "rules": (),
    }
    base.update(kw)
    with pytest.raises(InputError) as ei:
        WorkflowTemplate(**base)  # type: ignore[arg-type]
    assert fld in ei.value.field, (fld, str(ei.value))
    assert "template 'bad'" in str(ei.value)


def test_validation_errors() -> None:
    bad("tasks[1].id", tasks=(tool("a"), tool("a"), tool("c")))
    bad("tasks[0].kind", tasks=(TaskTemplate("a", "gpu"), tool("b"), tool("c")))
    bad("tasks[0].model", tasks=(TaskTemplate("a", "llm", model="gpt-9"), tool("b"), tool("c")))
    bad("tasks[0].tool", tasks=(TaskTemplate("a", "tool"), tool("b"), tool("c")))
    bad("tasks[2].cpu_work", tasks=(tool("a"), tool("b"), tool("c", -1.0)))
    neg = TaskTemplate("a", "llm", model="phi-2", prompt_tokens=-3)
    bad("tasks[0].prompt_tokens", tasks=(neg, tool("b"), tool("c")))
    unk = TaskTemplate("a", "llm", model="phi-2", output_tokens=TokenSpec("nope"))
    bad("tasks[0].output_tokens", tasks=(unk, tool("b"), tool("c")))
    bad("edges[0].src", edges=(Edge("q", "b"),))
    bad("edges[2].nbytes", edges=(Edge("a", "b"), Edge("b", "c"), Edge("a", "c", -5.0)))
    bad("edges", edges=(Edge("a", "b"), Edge("b", "c"), Edge("c", "a")))
    bad("rules[0].decider", rules=(FanOut("zz", ("b",), 2),))
    bad("rules[0].width", rules=(FanOut("a", ("b",), 0),))
    bad("rules[0].width", rules=(FanOut("a", ("b",), UniformInt(3, 2)),))
    bad("rules[0].decider", rules=(FanOut("c", ("b",), 2),))  # not an ancestor
    bad("rules[0].body", rules=(FanOut("a", ("b", "zz"), 2),))
    bad("rules[1].body[0]", rules=(FanOut("a", ("b",), 2), Loop("b", ("b",), 2, 0.5)))
    bad("rules[0].options", rules=(Branch("a", (BranchOption(0.5, ("b",)),)),))
    bad("rules[0].decider", rules=(Loop("b", ("c",), 2, 0.5),))  # decider outside its body
    bad("rules[0].decider", rules=(Loop("b", ("b", "c"), 2, 0.5),))  # decider not a sink
    bad("rules[0].max_iter", rules=(Loop("c", ("c",), 0, 0.5),))
    bad("rules[0].continue_prob", rules=(Loop("c", ("c",), 2, 1.5),))
    # a body that a path leaves and re-enters is not convex
    bad(
        "rules[0].body",
        rules=(FanOut("a", ("b", "c"), 2),),
        tasks=(tool("a"), tool("b"), tool("c"), tool("x")),
        edges=(Edge("a", "b"), Edge("b", "x"), Edge("x", "c")),
    )
    # the decider of a fan-out may not sit in a branch option
    bad(
        "rules[1].decider",
        rules=(
            Branch("a", (BranchOption(0.5, ("b",)), BranchOption(0.5, ()))),
            FanOut("b", ("c",), 2),
        ),
    )
    bad(
        "tasks[2].revealed_by",
        tasks=(tool("a"), tool("b"), TaskTemplate("c", "tool", tool="x", revealed_by="zz")),
    )


def test_decider_must_reach_option_without_other_options() -> None:
    # d -> p (option 0) -> r (option 1): r is reached only through p, which option 1 drops
    with pytest.raises(InputError, match="ancestor"):
        WorkflowTemplate(
            "x",
            (tool("d"), tool("p"), tool("r")),
            (Edge("d", "p"), Edge("p", "r")),
            (Branch("d", (BranchOption(0.5, ("p",)), BranchOption(0.5, ("r",)))),),
        )


# --------------------------------------------------------------------------- random templates


@st.composite
def serial_templates(draw: st.DrawFn) -> tuple[WorkflowTemplate, tuple[int, int]]:
    """A chain of segments, each static, a fan-out, a branch or a loop; valid by construction.
    Returns the template and the least and most tasks a realisation can have."""
    tasks: list[TaskTemplate] = []
    edges: list[Edge] = []
    rules: list[object] = []
    least = most = 1
    prev = "s0"
    tasks.append(llm(prev))
    nseg = draw(st.integers(1, 5))
    for k in range(nseg):
        kind = draw(st.sampled_from(["static", "fanout", "branch", "loop"]))
        size = draw(st.integers(1, 3))
        body = [f"k{k}b{j}" for j in range(size)]
        for j, b in enumerate(body):
            tasks.append(tool(b) if j % 2 else llm(b))
        # body is a chain, optionally with a shortcut edge
        for a, b in zip(body, body[1:], strict=False):
            edges.append(Edge(a, b, draw(st.sampled_from([0.0, 100.0]))))
        if size == 3 and draw(st.booleans()):
            edges.append(Edge(body[0], body[2]))
        edges.append(Edge(prev, body[0], 10.0))
        join = f"j{k}"
        tasks.append(tool(join))
        edges.append(Edge(body[-1], join, 5.0))
        least, most = least + 1, most + 1  # the join
        if kind == "static":
            least, most = least + size, most + size
        elif kind == "fanout":
            lo = draw(st.integers(1, 3))
            hi = lo + draw(st.integers(0, 3))
            rules.append(FanOut(prev, tuple(body), UniformInt(lo, hi)))
            least, most = least + lo * size, most + hi * size
        elif kind == "branch":
            edges.append(Edge(prev, join))  # the join keeps a parent whatever is drawn
            rules.append(Branch(prev, (BranchOption(0.5, tuple(body)), BranchOption(0.5, ()))))
            most += size
        else:
            max_iter = draw(st.integers(1, 4))
            p = draw(st.sampled_from([0.0, 0.5, 1.0]))
            rules.append(Loop(body[-1], tuple(body), max_iter, p))
            least += size * (max_iter if p == 1.0 else 1)
            most += size * (1 if p == 0.0 else max_iter)
        prev = join
    tpl = WorkflowTemplate("rand", tuple(tasks), tuple(edges), tuple(rules))  # type: ignore[arg-type]
    return tpl, (least, most)


# ``check`` is a pure function, so sharing it across hypothesis examples is safe.
_SHARED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=60, deadline=None, suppress_health_check=_SHARED)
@given(serial_templates(), st.integers(0, 2**32 - 1))
def test_random_templates_realise_valid_dags(
    check: Check, data: tuple[WorkflowTemplate, tuple[int, int]], seed: int
) -> None:
    tpl, (least, most) = data
    w = realize(tpl, np.random.default_rng(seed))
    check(w)
    assert least <= len(w) <= most
    assert realize(tpl, np.random.default_rng(seed)) == w


@st.composite
def random_rule_templates(draw: st.DrawFn) -> tuple[list[TaskTemplate], list[Edge], list[object]]:
    """Random forward DAGs with random rules: mostly well-formed ones (contiguous bodies
    after their decider), some arbitrary ones that validation must reject or accept safely."""
    n = draw(st.integers(2, 9))
    ids = [f"t{i}" for i in range(n)]
    tasks = [tool(t) if k % 2 else llm(t) for k, t in enumerate(ids)]
    backbone = draw(st.booleans())
    edges = [
        Edge(ids[a], ids[b], draw(st.sampled_from([0.0, 7.0])))
        for a in range(n)
        for b in range(a + 1, n)
        if (backbone and b == a + 1) or draw(st.integers(0, 3)) == 0
    ]
    rules: list[object] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["fanout", "branch", "loop"]))
        if draw(st.integers(0, 4)):
            a = draw(st.integers(0, n - 1))
            b = draw(st.integers(a + 1, n))
            body = tuple(ids[a:b])
            d = ids[b - 1] if kind == "loop" else ids[draw(st.integers(0, a))]
        else:
            d = draw(st.sampled_from(ids))
            body = tuple(draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True)))
        if kind == "fanout":
            rules.append(FanOut(d, body, UniformInt(1, draw(st.integers(1, 3)))))
        elif kind == "branch":
            split = draw(st.integers(0, len(body)))
            opts = (BranchOption(0.4, body[:split]), BranchOption(0.6, body[split:]))
            rules.append(Branch(d, opts))
        else:
            rules.append(Loop(d, body, draw(st.integers(1, 3)), 0.5, 3.0))
    return tasks, edges, rules


@settings(max_examples=150, deadline=None, suppress_health_check=_SHARED)
@given(random_rule_templates(), st.integers(0, 1000))
def test_random_rules_are_rejected_or_realise_valid_dags(
    check: Check, data: tuple[list[TaskTemplate], list[Edge], list[object]], seed: int
) -> None:
    tasks, edges, rules = data
    try:
        tpl = WorkflowTemplate("r", tuple(tasks), tuple(edges), tuple(rules))  # type: ignore[arg-type]
    except InputError as exc:
        # a rejection names the rule, task or edge at fault, in one line ...
        assert exc.field.startswith(("rules[", "tasks[", "edges")), exc
        assert "\n" not in str(exc)
        # ... and does not count as an example: were (nearly) every template rejected,
        # hypothesis fails the test (Unsatisfiable / filter_too_much) instead of passing.
        reject()
    assert tpl.rules == tuple(rules)
    for s in range(3):
        check(realize(tpl, np.random.default_rng(seed + s)))
