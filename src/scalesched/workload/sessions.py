"""Prefix identities and agent sessions: what an engine's prefix cache can reuse.

An agent's LLM calls are not independent prompts. Two kinds of shared prefix are modelled,
both as facts about the prompt text that a real router or engine can observe:

* **Application prompt** (``prefix_id``, ``prefix_tokens``): every call of an application
  starts with the same system prompt and tool schema, shared by all its workflows. A task
  template with ``prefix_id`` gets ``prefix_tokens`` prepended to its drawn prompt.
* **Session context** (``session`` label on the template, ``context_of`` on the instance):
  an agent's next turn re-sends its whole conversation so far. A call whose template names
  a session extends the context (prompt + output) of the *nearest earlier call of the same
  session among its ancestors* (the largest index, i.e. the latest in topological order):
  its prompt is that context plus its own drawn tokens (the tool result, the new
  instruction). Fan-out copies of a session call each extend the same context: the
  branches of best-of-n or tree-of-thought re-sample from a common point.

A call whose context would not fit its model's context window (:func:`context_window`, the
model catalog's published figure) is *compacted*: it starts a fresh context (application
prompt plus its own tokens, no ``context_of``), as agent frameworks summarise or truncate
long histories. A session's calls must use one model (a context on another model is not
reusable; such a call opens a new context).

Linking draws nothing, so every other draw of a realisation is unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from scalesched.cluster.perf import MODELS
from scalesched.workload.instance import TaskInstance

DEFAULT_CONTEXT_WINDOW = 4096
"""The window of a model the catalog does not know (Llama 2's)."""


def context_window(model: str | None) -> int:
    """Prompt + output tokens ``model`` accepts: the catalog's published figure."""
    spec = MODELS.get(model or "")
    return DEFAULT_CONTEXT_WINDOW if spec is None else spec.context_window


class _SessionPlan(Protocol):
    """The template fields linking reads (``template._TaskPlan``)."""

    prefix_id: str | None
    prefix_tokens: int
    session: str | None


def link_sessions(
    tasks: list[TaskInstance],
    parents: Sequence[Sequence[int]],
    plans: Sequence[_SessionPlan],
) -> list[TaskInstance]:
    """Tasks (topological order) with prefixes prepended and session contexts linked;
    ``plans[i]`` is the template plan of task ``i``."""
    out = list(tasks)
    # nearest[i][label]: the latest call of session ``label`` that is ``i`` or its ancestor.
    nearest: list[dict[str, int]] = []
    for i, task in enumerate(out):
        seen: dict[str, int] = {}
        for p in parents[i]:
            for label, j in nearest[p].items():
                if seen.get(label, -1) < j:
                    seen[label] = j
        plan = plans[i]
        if task.kind == "llm" and (plan.prefix_id is not None or plan.session is not None):
            ctx = seen.get(plan.session, -1) if plan.session is not None else -1
            out[i] = _linked(task, plan, out[ctx] if ctx >= 0 else None, ctx)
            if plan.session is not None:
                seen = dict(seen)
                seen[plan.session] = i
        nearest.append(seen)
    return out


def _linked(
    task: TaskInstance, plan: _SessionPlan, ctx: TaskInstance | None, ctx_index: int
) -> TaskInstance:
    window = context_window(task.model)
    own = task.prompt_tokens
    if ctx is not None and ctx.model == task.model:
        prompt = ctx.prompt_tokens + ctx.output_tokens + own
        if prompt + task.output_tokens <= window:
            return dataclasses.replace(
                task,
                prompt_tokens=prompt,
                prefix_id=ctx.prefix_id,
                prefix_tokens=ctx.prefix_tokens,
                context_of=ctx_index,
            )
    prefix = plan.prefix_tokens if plan.prefix_id is not None else 0
    return dataclasses.replace(
        task,
        prompt_tokens=prefix + own,
        prefix_id=plan.prefix_id,
        prefix_tokens=prefix,
    )


# --------------------------------------------------------------------------- re-sampled branches

REPLAY_KEY = 2**32 - 1
"""Spawn key of the replay generator: a child index ``SeedSequence.spawn`` never reaches, so
the hints' and repeats' spawned generators are the ones they were before replays existed."""


def replay_rng(rng: np.random.Generator) -> np.random.Generator:
    """A generator for the replay marks of one realisation, independent of ``rng``'s stream
    (and of every generator spawned from it) and leaving its state untouched."""
    seq = getattr(rng.bit_generator, "seed_seq", None)
    if isinstance(seq, np.random.SeedSequence):
        return np.random.default_rng(
            np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, REPLAY_KEY))
        )
    text = "replays:" + repr(rng.bit_generator.state)  # not seeded through a SeedSequence
    digest = hashlib.blake2b(text.encode(), digest_size=8)
    return np.random.default_rng(int.from_bytes(digest.digest(), "little"))


def mark_replays(
    tasks: Sequence[TaskInstance],
    groups: Sequence[tuple[float, Sequence[int]]],
    rng: np.random.Generator,
) -> list[TaskInstance]:
    """Tasks with their re-sampled branches marked: ``groups`` holds, per template call
    with an ``agreement`` a, the indices of its copies.

    Copies that continue the same context form a branch group; its first copy is the
    *first path*. Every other branch samples the same distribution from the same point, so
    its tokens agree with the first path's token by token, each with probability a, until
    the first disagreement: it repeats the first ``G ~ Geometric(1 - a) - 1`` tokens of the
    first path (mean ``a / (1 - a)``), capped by the first path's length and by its own
    length less one (the token where it diverges is its own). One draw per branch after
    the first, in index order (none when a = 0). A copy that opens a new context
    (compacted) is no branch.
    """
    out = list(tasks)
    for a, copies in groups:
        by_context: dict[int, list[int]] = {}
        for i in copies:
            ctx = out[i].context_of
            if ctx is not None:
                by_context.setdefault(ctx, []).append(i)
        for members in by_context.values():
            if len(members) < 2:
                continue
            first = members[0]
            spine = out[first].output_tokens
            out[first] = dataclasses.replace(out[first], resample_of=first)
            for i in members[1:]:
                run = int(rng.geometric(1.0 - a)) - 1 if a > 0 else 0
                shared = max(0, min(run, spine, out[i].output_tokens - 1))
                out[i] = dataclasses.replace(out[i], resample_of=first, replay_tokens=shared)
    return out
