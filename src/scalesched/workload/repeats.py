"""Repeated tool calls: which tool tasks of a workflow are identical to an earlier one.

Agents often call the same tool with the same inputs twice within one request (a search
re-run after a replan, a file read again by a later step). With ``--tool-repeat P`` each
tool task of a realised workflow, in topological order, is with probability ``P`` marked a
repeat of an earlier tool task of the same workflow with the same tool (chosen uniformly
among them; a task with no such earlier task is never a repeat). A repeat takes its
original's inputs, so its CPU work, external latency, their estimates and its hint become
the original's: an identical call costs what the original cost. Only a repeat's index
``repeat_of`` says so; whether a run reuses the result is the simulator's ``--tool-cache``
(:mod:`scalesched.sim.tool_cache`).

"Earlier" is the topological order of ``WorkflowInstance.tasks``: an original always has a
smaller index than its repeat, but need not be its ancestor, so a repeat may start while
its original is still running (the simulator then runs it normally).

The draws come from a generator of their own, spawned from the realisation's generator
after the workflow is realised (``Generator.spawn`` does not advance it, as with the hints
of :mod:`scalesched.workload.hints`), so with ``P = 0`` (the default: nothing is drawn)
every workflow is bit-identical to what it was before repeats existed, and with ``P > 0``
everything but the repeats' marks and costs is too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np

from scalesched.errors import InputError
from scalesched.workload.instance import WorkflowInstance
from scalesched.workload.source import WorkflowSource


def check_repeat_probability(p: float, where: str = "--tool-repeat") -> float:
    """``p`` checked: a finite probability in [0, 1)."""
    if (
        isinstance(p, bool)
        or not isinstance(p, int | float)
        or not (math.isfinite(p) and 0 <= p < 1)
    ):
        raise InputError(where, "tool_repeat", f"must be a probability in [0, 1), got {p!r}")
    return float(p)


def repeat_rng(rng: np.random.Generator) -> np.random.Generator:
    """A generator for the repeat marks of one realisation, independent of ``rng``'s stream
    (and of the hints' generator, an earlier child) and leaving its state untouched."""
    try:
        return rng.spawn(1)[0]
    except TypeError:  # a generator not seeded through a SeedSequence: key on its state
        text = "repeats:" + repr(rng.bit_generator.state)
        digest = hashlib.blake2b(text.encode(), digest_size=8)
        return np.random.default_rng(int.from_bytes(digest.digest(), "little"))


def mark_repeats(wf: WorkflowInstance, p: float, rng: np.random.Generator) -> WorkflowInstance:
    """``wf`` with each tool task marked, with probability ``p``, as a repeat of a uniformly
    chosen earlier tool task with the same tool (see the module docstring). One uniform
    draw per tool task that has a candidate, one more per repeat."""
    if p <= 0:
        return wf
    tasks = list(wf.tasks)
    by_tool: dict[str, list[int]] = {}
    changed = False
    for i, task in enumerate(wf.tasks):
        if task.kind != "tool" or task.tool is None:
            continue
        earlier = by_tool.setdefault(task.tool, [])
        if earlier and rng.random() < p:
            j = earlier[int(rng.integers(len(earlier)))]
            orig = tasks[j]
            tasks[i] = dataclasses.replace(
                task,
                cpu_work=orig.cpu_work,
                ext_latency=orig.ext_latency,
                ext_latency_est=orig.ext_latency_est,
                difficulty_hint=orig.difficulty_hint,
                repeat_of=j,
            )
            changed = True
        else:
            earlier.append(i)  # only originals are candidates: no chains of repeats
    return dataclasses.replace(wf, tasks=tuple(tasks)) if changed else wf


class RepeatSource:
    """A workload whose realised workflows carry repeat marks (``--tool-repeat P``)."""

    def __init__(self, inner: WorkflowSource, p: float) -> None:
        self.inner, self.p = inner, check_repeat_probability(p)
        self.name = inner.name

    def sample(self, rng: np.random.Generator) -> WorkflowInstance:
        wf = self.inner.sample(rng)
        return mark_repeats(wf, self.p, repeat_rng(rng))
