"""Prefix identities and session contexts of realised workflows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload.agent_patterns import (
    AGENT_PATTERNS,
    best_of_n,
    self_consistency,
    tool_heavy,
    tree_of_thought,
)
from scalesched.workload.patterns import PATTERNS
from scalesched.workload.sessions import context_window
from scalesched.workload.source import get_workload, list_workloads, workflow_rng
from scalesched.workload.template import TaskTemplate, TokenSpec, WorkflowTemplate, realize


def _strip(t: WorkflowTemplate) -> WorkflowTemplate:
    """The same template without prefixes or sessions."""
    tasks = tuple(
        dataclasses.replace(x, prefix_id=None, prefix_tokens=0, session=None, agreement=None)
        for x in t.tasks
    )
    return WorkflowTemplate(t.name, tasks, t.edges, t.rules)


def test_session_turn_extends_its_context() -> None:
    tpl = tool_heavy()
    for seed in range(20):
        w = realize(tpl, np.random.default_rng(seed))
        own = realize(_strip(tpl), np.random.default_rng(seed))
        assert [t.output_tokens for t in w.tasks] == [t.output_tokens for t in own.tasks]
        for i, t in enumerate(w.tasks):
            if t.kind != "llm":
                assert t.prefix_id is None and t.context_of is None
                continue
            assert t.prefix_id == "tool-heavy/agent" and t.prefix_tokens == 1200
            if t.context_of is None:  # opens the session (or was compacted)
                assert t.prompt_tokens == 1200 + own.tasks[i].prompt_tokens
            else:
                c = w.tasks[t.context_of]
                assert t.context_of < i and c.model == t.model
                assert t.prompt_tokens == (
                    c.prompt_tokens + c.output_tokens + own.tasks[i].prompt_tokens
                )
            assert t.prompt_tokens + t.output_tokens <= context_window(t.model) or (
                t.context_of is None
            )


def test_compaction_restarts_a_context_that_would_overflow() -> None:
    compacted = 0
    for seed in range(200):
        w = realize(tool_heavy(), np.random.default_rng(seed))
        llm = [i for i, t in enumerate(w.tasks) if t.kind == "llm"]
        compacted += sum(1 for i in llm[1:] if w.tasks[i].context_of is None)
    assert compacted > 0  # long sessions do overflow a 4096-token window


def test_branches_resample_from_a_common_point() -> None:
    w = realize(tree_of_thought(), np.random.default_rng(1))
    root = next(i for i, t in enumerate(w.tasks) if t.id == "root")
    expands = [t for t in w.tasks if t.id.startswith("expand#")]
    assert len(expands) >= 2 and all(t.context_of == root for t in expands)
    assert len({t.prompt_tokens for t in expands}) == 1
    evaluate = next(i for i, t in enumerate(w.tasks) if t.id == "evaluate")
    # The nearest session ancestor of evaluate: the latest expand copy.
    assert w.tasks[evaluate].context_of == max(
        i for i, t in enumerate(w.tasks) if t.id.startswith("expand#")
    )


def test_existing_presets_carry_no_prefix_identity() -> None:
    for name in PATTERNS:
        w = get_workload(name).sample(workflow_rng(0, 0))
        assert all(t.prefix_id is None and t.context_of is None for t in w.tasks)


@pytest.mark.parametrize("name", sorted(AGENT_PATTERNS))
def test_agent_presets_realise_and_are_listed(name: str) -> None:
    assert name in dict(list_workloads())
    src = get_workload(name)
    for i in range(5):
        w = src.sample(workflow_rng(3, i))
        assert w == src.sample(workflow_rng(3, i))  # same seed, same workflow
        assert any(t.prefix_id for t in w.tasks)
    # Hidden from the duration predictor's pattern one-hot (its input size is fixed).
    assert name not in PATTERNS


def test_session_without_application_is_an_input_error() -> None:
    with pytest.raises(InputError, match="prefix_id"):
        WorkflowTemplate(
            "bad", (TaskTemplate("a", "llm", model="phi-2", prompt_tokens=8, session="s"),)
        )
    with pytest.raises(InputError, match="only llm tasks"):
        WorkflowTemplate(
            "bad", (TaskTemplate("a", "tool", tool="web_search", prefix_id="app", cpu_work=1.0),)
        )


# --------------------------------------------------------------------------- re-sampled branches


@pytest.mark.parametrize("build", [best_of_n, self_consistency, tree_of_thought])
def test_branches_repeat_a_prefix_of_their_first_path(build) -> None:  # type: ignore[no-untyped-def]
    marked = 0
    for seed in range(30):
        w = realize(build(), workflow_rng(seed, 0))
        groups: dict[int, list[int]] = {}
        for i, t in enumerate(w.tasks):
            if t.resample_of is not None:
                groups.setdefault(t.resample_of, []).append(i)
        assert groups, "every fan-out of these presets forms a branch group"
        for first, members in groups.items():
            assert members[0] == first and len(members) >= 2
            head = w.tasks[first]
            assert head.replay_tokens == 0
            for i in members:
                t = w.tasks[i]
                assert t.context_of == head.context_of and t.prompt_tokens == head.prompt_tokens
                assert 0 <= t.replay_tokens <= min(head.output_tokens, t.output_tokens - 1)
                marked += t.replay_tokens > 0
    assert marked > 0


def test_replay_marks_change_no_other_draw() -> None:
    for build in (best_of_n, self_consistency, tree_of_thought):
        for seed in range(10):
            marked = realize(build(), workflow_rng(seed, 3))
            plain = realize(build(agreement=None), workflow_rng(seed, 3))
            cleared = [
                dataclasses.replace(t, resample_of=None, replay_tokens=0) for t in marked.tasks
            ]
            assert cleared == list(plain.tasks)
            assert marked.parents == plain.parents


def test_agreement_sets_the_mean_shared_run() -> None:
    """G ~ Geometric(1 - a) - 1 has mean a / (1 - a): 9 tokens at a = 0.9 (caps aside)."""
    runs = []
    for seed in range(300):
        w = realize(self_consistency(agreement=0.9), workflow_rng(seed, 0))
        runs += [t.replay_tokens for t in w.tasks if t.resample_of not in (None, w.tasks.index(t))]
    assert np.mean(runs) == pytest.approx(9.0, rel=0.1)
    w = realize(self_consistency(agreement=0.0), workflow_rng(1, 0))
    assert all(t.replay_tokens == 0 for t in w.tasks)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"agreement": 1.0}, "probability in [0, 1)"),
        ({"agreement": -0.1}, "probability in [0, 1)"),
        ({"session": None}, "only session calls"),
        ({"prompt_tokens": TokenSpec("conv_prompt", 1.0, 1, 64)}, "fixed count"),
    ],
)
def test_bad_agreement_is_named(change: dict[str, object], message: str) -> None:
    tpl = best_of_n()
    tasks = tuple(
        dataclasses.replace(t, **change) if t.id == "sample" else t  # type: ignore[arg-type]
        for t in tpl.tasks
    )
    with pytest.raises(InputError, match=r"tasks\[1\]\.agreement") as err:
        WorkflowTemplate(tpl.name, tasks, tpl.edges, tpl.rules)
    assert message in str(err.value)
