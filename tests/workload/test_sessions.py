"""Prefix identities and session contexts of realised workflows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload.agent_patterns import AGENT_PATTERNS, tool_heavy, tree_of_thought
from scalesched.workload.patterns import PATTERNS
from scalesched.workload.sessions import CONTEXT_WINDOW
from scalesched.workload.source import get_workload, list_workloads, workflow_rng
from scalesched.workload.template import TaskTemplate, WorkflowTemplate, realize


def _strip(t: WorkflowTemplate) -> WorkflowTemplate:
    """The same template without prefixes or sessions."""
    tasks = tuple(
        dataclasses.replace(x, prefix_id=None, prefix_tokens=0, session=None) for x in t.tasks
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
            assert t.prompt_tokens + t.output_tokens <= CONTEXT_WINDOW[t.model or ""] or (
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
