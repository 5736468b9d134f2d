"""Workflows generated from WfCommons recipes: ``wfcommons:RECIPE:TASKS[:SEED]``.

The recipes of the ``wfcommons`` package (WfChef models of real workflow executions:
montage, epigenomics, blast, genome, cycles, soykb, srasearch, seismology, bwa) ship inside
the package and generate offline. ``TASKS`` is the recipe's ``num_tasks``, an upper bound:
WfChef counts two placeholder nodes, so an instance has about ``TASKS - 2`` tasks. Each
recipe grows from its smallest base graph, which sets a minimum ``TASKS``.

Generation runs in-process with the recipe's ``WorkflowGenerator``, with Python's
``random`` and numpy's global generator seeded with ``SEED`` (default 0) and restored
afterwards. The instance is serialised to WfFormat in memory (``Workflow.generate_json``)
and read by :func:`scalesched.workload.wfformat.template_from_wfformat`, so task runtimes
become CPU tool work (``cpu_work`` = ``runtimeInSeconds``) and the files a parent writes
and its child reads become the edge's payload. Nothing touches the network (WfCommons'
instance loader, which fetches its schema, is not used).

The DAG is generated once per ``(recipe, tasks, seed)`` and cached in memory; every draw
of the source returns that same instance (the draw's generator is ignored), so a run of N
workflows replays one real-trace-shaped workflow N times. Pick another ``SEED`` for
another instance.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np

from scalesched.errors import InputError
from scalesched.workload.instance import WorkflowInstance

PREFIX = "wfcommons:"
RECIPES: dict[str, str] = {
    "montage": "MontageRecipe",
    "epigenomics": "EpigenomicsRecipe",
    "blast": "BlastRecipe",
    "genome": "GenomeRecipe",
    "cycles": "CyclesRecipe",
    "soykb": "SoykbRecipe",
    "srasearch": "SrasearchRecipe",
    "seismology": "SeismologyRecipe",
    "bwa": "BwaRecipe",
}
"""Recipe name -> class in ``wfcommons.wfchef.recipes``."""
MAX_TASKS = 100_000
INSTALL_HINT = "pip install scalesched[wfcommons]"
SPEC_FORM = "wfcommons:RECIPE:TASKS[:SEED]"


@dataclass(frozen=True, slots=True)
class WfCommonsSpec:
    recipe: str
    tasks: int
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.recipe}:{self.tasks}:{self.seed}"


@dataclass
class WfCommonsSource:
    """A WorkflowSource that returns one generated instance on every draw."""

    name: str
    spec: WfCommonsSpec
    description: str = ""

    def sample(self, rng: np.random.Generator) -> WorkflowInstance:
        return generate_instance(self.spec.recipe, self.spec.tasks, self.spec.seed)


def parse_spec(spec: str, source: str = "--workload") -> WfCommonsSpec:
    """Check ``wfcommons:RECIPE:TASKS[:SEED]`` (InputError naming ``source`` and the part)."""
    parts = spec.split(":")
    if len(parts) not in (3, 4) or parts[0] != PREFIX[:-1]:
        raise InputError(source, "wfcommons", f"expected {SPEC_FORM}, got {spec!r}")
    recipe = parts[1].strip().lower()
    if recipe not in RECIPES:
        raise InputError(
            source, "recipe", f"unknown WfCommons recipe {parts[1]!r}; known: {', '.join(RECIPES)}"
        )
    tasks = _integer(parts[2], source, "tasks")
    seed = _integer(parts[3], source, "seed") if len(parts) == 4 else 0
    if tasks > MAX_TASKS:
        raise InputError(source, "tasks", f"at most {MAX_TASKS} tasks, got {tasks}")
    _require_wfcommons(source)
    least = min_tasks(recipe)
    if tasks < least:
        raise InputError(
            source, "tasks", f"recipe {recipe!r} needs TASKS >= {least} (its minimum), got {tasks}"
        )
    return WfCommonsSpec(recipe, tasks, seed)


def wfcommons_source(spec: str, source: str = "--workload") -> WfCommonsSource:
    """The source of a ``wfcommons:`` spec; the instance is generated on first use."""
    s = parse_spec(spec, source)
    return WfCommonsSource(
        s.name,
        s,
        f"WfCommons {s.recipe} recipe, TASKS={s.tasks}, seed {s.seed} (one fixed instance)",
    )


def _integer(text: str, source: str, field: str) -> int:
    t = text.strip()
    if not t.isdigit():
        raise InputError(source, field, f"{field.upper()} must be an integer >= 0, got {text!r}")
    return int(t)


def _require_wfcommons(source: str) -> None:
    try:
        import wfcommons  # noqa: F401
    except ImportError:
        raise InputError(
            source, "wfcommons", f"the wfcommons package is not installed: {INSTALL_HINT}"
        ) from None


@cache
def min_tasks(recipe: str) -> int:
    """The smallest ``TASKS`` the recipe accepts: the order of its smallest base graph."""
    pkg = f"wfcommons.wfchef.recipes.{recipe}"
    summary = json.loads(
        resources.files(pkg).joinpath("microstructures", "summary.json").read_text("utf-8")
    )
    return int(min(g["order"] for g in summary["base_graphs"].values()))


def generate_document(recipe: str, tasks: int, seed: int) -> dict[str, Any]:
    """Generate one instance and return it as a WfFormat document (a dict)."""
    _require_wfcommons("wfcommons")
    import wfcommons.wfchef.recipes as recipes
    from wfcommons import WorkflowGenerator

    cls = getattr(recipes, RECIPES[recipe])
    py_state = random.getstate()
    np_state = np.random.get_state()
    try:
        random.seed(seed)
        np.random.seed(seed)
        try:
            workflow = WorkflowGenerator(cls(num_tasks=tasks)).build_workflow(f"wfcommons-{recipe}")
        except ValueError as exc:  # WfChef: "Cannot create synthetic graph with N nodes ..."
            raise InputError(
                f"{PREFIX}{recipe}:{tasks}:{seed}",
                "tasks",
                f"recipe {recipe!r} needs TASKS >= {min_tasks(recipe)} ({exc})",
            ) from None
        workflow.generate_json()
        doc: dict[str, Any] = workflow.workflow_json
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
    return doc


@lru_cache(maxsize=64)
def generate_instance(recipe: str, tasks: int, seed: int) -> WorkflowInstance:
    """The cached instance of ``wfcommons:recipe:tasks:seed``."""
    from scalesched.workload.template import realize
    from scalesched.workload.wfformat import template_from_wfformat

    doc = generate_document(recipe, tasks, seed)
    template = template_from_wfformat(
        doc, f"{PREFIX}{recipe}:{tasks}:{seed}", default_name=f"wfcommons-{recipe}"
    )
    # A plain WfCommons instance has no rules or distributions: realising draws nothing.
    return realize(template, np.random.default_rng(0))
