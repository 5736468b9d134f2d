"""Load and save workflows in WfFormat, the JSON format of the WfCommons project (1.5).

A plain WfCommons instance loads as a static DAG of CPU ``tool`` tasks; scalesched's
agentic fields ride along as a documented extension (``"scalesched"`` objects on tasks,
files and the workflow), see ``docs/wfformat.md``.  In short:

* plain task -> ``tool`` task, tool ``"wfcommons:<category>"`` (the task's ``category``
  if it has one, else its ``name`` with a trailing ``_<digits>`` / ``_ID<digits>``
  removed), ``cpu_work`` = the execution record's ``runtimeInSeconds`` × the speed of the
  first machine it ran on (``cpu.speedInMHz`` / :data:`REFERENCE_CPU_MHZ`; 1.0 when
  unknown).  ``coreCount`` is ignored: the runtime is taken as single-core work.
* edge payload = the sum of ``sizeInBytes`` of the files that are an output of the parent
  and an input of the child.
* ``workflow.specification.tasks[i].scalesched`` sets the task's kind, model, tokens, tool,
  cpu work, external latency; ``workflow.scalesched`` holds the dynamic rules and the
  pattern label; ``workflow.specification.files[j].scalesched.size`` an exact or
  distributed payload.

Every error is an :class:`~scalesched.errors.InputError` naming the file and the JSON
field path, e.g. ``workflow.specification.tasks[3].parents``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalesched.errors import InputError, parse_json, read_user_text, short_repr
from scalesched.workload.hints import MAX_HINT
from scalesched.workload.instance import WorkflowInstance
from scalesched.workload.template import (
    MAX_BYTES,
    MAX_SECONDS,
    Branch,
    BranchOption,
    Edge,
    FanOut,
    IntNum,
    LogNormal,
    Loop,
    Num,
    Pmf,
    Rule,
    TaskTemplate,
    Tokens,
    TokenSpec,
    ToolChoice,
    ToolOption,
    Uniform,
    UniformInt,
    WorkflowTemplate,
    known_models,
    quantity_problem,
    token_dists,
)

SCHEMA_VERSION = "1.5"
REFERENCE_CPU_MHZ = 2500.0
MAX_CPU_MHZ = 1e5
"""Largest machine speed read from an execution record (a runtime x speed stays finite)."""
"""A core of speed 1.0 (``ServerSpec.core_speed``) is taken to run at 2.5 GHz."""
EXT = "scalesched"
_TASKS = "workflow.specification.tasks"
_FILES = "workflow.specification.files"

# --------------------------------------------------------------------------- JSON helpers


class _Ctx:
    def __init__(self, source: str) -> None:
        self.source = source

    def err(self, path: str, msg: str) -> InputError:
        return InputError(self.source, path, msg)

    def obj(self, v: Any, path: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.err(path, f"expected a JSON object, got {_kind(v)}")
        return v

    def lst(self, v: Any, path: str) -> list[Any]:
        if not isinstance(v, list):
            raise self.err(path, f"expected a JSON array, got {_kind(v)}")
        return v

    def string(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.err(path, f"expected a non-empty string, got {_kind(v)}")
        return v

    def strings(self, v: Any, path: str) -> list[str]:
        return [self.string(x, f"{path}[{k}]") for k, x in enumerate(self.lst(v, path))]

    def number(self, v: Any, path: str, *, nonneg: bool = True) -> float:
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 1e300:
            raise self.err(path, f"expected a finite number, got {_kind(v)}")
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise self.err(path, f"expected a number, got {_kind(v)}")
        if nonneg and v < 0:
            raise self.err(path, f"must be >= 0, got {short_repr(v)}")
        return float(v)

    def integer(self, v: Any, path: str, *, minimum: int = 0) -> int:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(path, f"expected an integer, got {_kind(v)}")
        if v < minimum:
            raise self.err(path, f"must be >= {minimum}, got {short_repr(v)}")
        return v


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {json.dumps(v)}"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, int):
        return f"int {short_repr(v)}"
    return f"{type(v).__name__} {short_repr(json.dumps(v))}"


def _parse_num(c: _Ctx, v: Any, path: str) -> Num:
    if isinstance(v, dict):
        d = v.get("dist")
        if d == "uniform":
            ulo = c.number(v.get("lo"), path + ".lo")
            uhi = c.number(v.get("hi"), path + ".hi")
            if uhi < ulo:
                raise c.err(path, f"uniform needs lo <= hi, got lo={ulo}, hi={uhi}")
            return Uniform(ulo, uhi)
        if d == "lognormal":
            med = c.number(v.get("median"), path + ".median")
            if med <= 0:
                raise c.err(path + ".median", f"must be > 0, got {med}")
            sig = c.number(v.get("sigma"), path + ".sigma")
            lo = c.number(v.get("lo", 0.0), path + ".lo")
            hi: float | None = None if v.get("hi") is None else c.number(v["hi"], path + ".hi")
            if hi is not None and hi < lo:
                raise c.err(path, f"lognormal clip needs lo <= hi, got lo={lo}, hi={hi}")
            return LogNormal(med, sig, lo, hi)
        raise c.err(path + ".dist", f"unknown distribution {d!r}; known: 'uniform', 'lognormal'")
    return c.number(v, path)


def _dump_num(v: Num) -> Any:
    if isinstance(v, Uniform):
        return {"dist": "uniform", "lo": v.lo, "hi": v.hi}
    if isinstance(v, LogNormal):
        out: dict[str, Any] = {"dist": "lognormal", "median": v.median, "sigma": v.sigma}
        if v.lo:
            out["lo"] = v.lo
        if v.hi is not None:
            out["hi"] = v.hi
        return out
    return float(v)


def _parse_tokens(c: _Ctx, v: Any, path: str) -> Tokens:
    if isinstance(v, dict):
        name = c.string(v.get("dist"), path + ".dist")
        dists = token_dists()
        if name not in dists:
            raise c.err(
                path + ".dist", f"unknown token distribution {name!r}; known: {', '.join(dists)}"
            )
        scale = c.number(v.get("scale", 1.0), path + ".scale")
        if scale <= 0:
            raise c.err(path + ".scale", f"must be > 0, got {scale}")
        lo = c.integer(v.get("lo", 1), path + ".lo")
        hi = None if v.get("hi") is None else c.integer(v["hi"], path + ".hi", minimum=lo)
        return TokenSpec(name, scale, lo, hi)
    return c.integer(v, path)


def _dump_tokens(v: Tokens) -> Any:
    if isinstance(v, TokenSpec):
        out: dict[str, Any] = {"dist": v.dist, "scale": v.scale, "lo": v.lo}
        if v.hi is not None:
            out["hi"] = v.hi
        return out
    return int(v)


def _parse_width(c: _Ctx, v: Any, path: str) -> IntNum:
    if isinstance(v, dict):
        d = v.get("dist")
        if d == "uniformInt":
            lo = c.integer(v.get("lo"), path + ".lo", minimum=1)
            hi = c.integer(v.get("hi"), path + ".hi", minimum=lo)
            return UniformInt(lo, hi)
        if d == "pmf":
            vals = [
                c.integer(x, f"{path}.values[{k}]", minimum=1)
                for k, x in enumerate(c.lst(v.get("values"), path + ".values"))
            ]
            probs = [
                c.number(x, f"{path}.probs[{k}]")
                for k, x in enumerate(c.lst(v.get("probs"), path + ".probs"))
            ]
            if len(vals) != len(probs) or not vals:
                raise c.err(path, "pmf needs as many probs as values, at least one")
            return Pmf(tuple(vals), tuple(probs))
        raise c.err(path + ".dist", f"unknown width distribution {d!r}; known: 'uniformInt', 'pmf'")
    return c.integer(v, path, minimum=1)


def _dump_width(v: IntNum) -> Any:
    if isinstance(v, UniformInt):
        return {"dist": "uniformInt", "lo": v.lo, "hi": v.hi}
    if isinstance(v, Pmf):
        return {"dist": "pmf", "values": list(v.values), "probs": list(v.probs)}
    return int(v)


# --------------------------------------------------------------------------- loading


def load_workflow_template(path: str | Path) -> WorkflowTemplate:
    """Read a WfFormat file into a template (InputError naming the file and field)."""
    src = str(path)
    p = Path(path)
    text = read_user_text(p)
    doc = parse_json(text, src)
    return template_from_wfformat(doc, src, default_name=p.stem)


_SUFFIX = re.compile(r"_(?:ID)?\d+$")


def template_from_wfformat(
    doc: Any, source: str = "WfFormat document", default_name: str = "workflow"
) -> WorkflowTemplate:
    """Build a template from a parsed WfFormat document (see :func:`load_workflow_template`)."""
    c = _Ctx(source)
    head = _document_head(c, doc, default_name)
    sizes = _file_sizes(c, head.spec)
    exe = _execution_records(c, head.wf)
    ids, objs = _task_ids(c, head.raw_tasks)
    parents = _task_parents(c, ids, objs)
    _check_acyclic(c, ids, parents)
    inputs, outputs = _task_files(c, objs, sizes)
    edges = _edges_from_files(c, ids, parents, inputs, outputs, sizes)
    tasks = [
        _parse_task(c, i, objs[i], ids[i], exe.runtime, exe.machine_of, exe.speed, exe.category)
        for i in range(len(ids))
    ]
    wpath = "workflow.scalesched" if EXT in head.wf or EXT not in head.root else EXT
    rules, pattern = _workflow_extension(c, head.wf.get(EXT, head.root.get(EXT)), wpath)
    try:
        return WorkflowTemplate(
            name=head.name,
            tasks=tuple(tasks),
            edges=tuple(edges),
            rules=tuple(rules),
            pattern=pattern,
            description=head.description,
            source=source,
        )
    except InputError as e:
        raise InputError(source, _json_field(e.field, wpath), e.message) from None


@dataclass(frozen=True, slots=True)
class _Head:
    """The top of a WfFormat document, checked: where its parts are."""

    root: dict[str, Any]
    wf: dict[str, Any]
    spec: dict[str, Any]
    raw_tasks: list[Any]
    name: str
    description: str


def _document_head(c: _Ctx, doc: Any, default_name: str) -> _Head:
    """The name, the description and the path to a non-empty task list (WfFormat 1.5
    keeps tasks in ``workflow.specification.tasks``)."""
    root = c.obj(doc, "(root)")
    name = root.get("name", default_name)
    name = c.string(name, "name")
    description = root.get("description", "")
    if not isinstance(description, str):
        raise c.err("description", f"expected a string, got {_kind(description)}")
    if "workflow" not in root:
        raise c.err(
            "workflow", "missing (a WfFormat 1.5 document has workflow.specification.tasks)"
        )
    wf = c.obj(root["workflow"], "workflow")
    if "specification" not in wf:
        raise c.err(
            "workflow.specification",
            "missing (WfFormat 1.5 keeps tasks in workflow.specification.tasks)",
        )
    spec = c.obj(wf["specification"], "workflow.specification")
    if "tasks" not in spec:
        raise c.err(_TASKS, "missing")
    raw_tasks = c.lst(spec["tasks"], _TASKS)
    if not raw_tasks:
        raise c.err(_TASKS, "a workflow needs at least one task")
    return _Head(root, wf, spec, raw_tasks, name, description)


def _file_sizes(c: _Ctx, spec: dict[str, Any]) -> dict[str, Num]:
    """Each file's size in bytes: ``sizeInBytes``, or the extension's exact or distributed
    ``size`` when it has one."""
    sizes: dict[str, Num] = {}
    for j, f in enumerate(c.lst(spec.get("files", []), _FILES)):
        fp = f"{_FILES}[{j}]"
        f = c.obj(f, fp)
        fid = c.string(f.get("id"), fp + ".id")
        if fid in sizes:
            raise c.err(fp + ".id", f"duplicate file id {fid!r}")
        if "sizeInBytes" not in f:
            raise c.err(fp + ".sizeInBytes", "missing")
        size: Num = c.number(f["sizeInBytes"], fp + ".sizeInBytes")
        size_path = fp + ".sizeInBytes"
        fext = f.get(EXT)
        if fext is not None:
            fext = c.obj(fext, f"{fp}.{EXT}")
            if "size" in fext:
                size_path = f"{fp}.{EXT}.size"
                size = _parse_num(c, fext["size"], size_path)
        problem = quantity_problem(size, MAX_BYTES)
        if problem is not None:
            raise c.err(size_path, problem)
        sizes[fid] = size
    return sizes


@dataclass(slots=True)
class _Execution:
    """What an execution record says about each task: its measured runtime, the machine it
    ran on, and that machine's speed relative to :data:`REFERENCE_CPU_MHZ`."""

    runtime: dict[str, float] = field(default_factory=dict)
    machine_of: dict[str, str] = field(default_factory=dict)
    speed: dict[str, float] = field(default_factory=dict)
    category: dict[str, str] = field(default_factory=dict)


def _execution_records(c: _Ctx, wf: dict[str, Any]) -> _Execution:
    """The optional ``workflow.execution``: machine speeds, then per-task records."""
    out = _Execution()
    exe_raw = wf.get("execution")
    if exe_raw is None:
        return out
    ep = "workflow.execution"
    exe = c.obj(exe_raw, ep)
    for m_i, m in enumerate(c.lst(exe.get("machines", []), ep + ".machines")):
        mp = f"{ep}.machines[{m_i}]"
        m = c.obj(m, mp)
        node = c.string(m.get("nodeName"), mp + ".nodeName")
        cpu = m.get("cpu")
        if cpu is not None and c.obj(cpu, mp + ".cpu").get("speedInMHz") is not None:
            mhz = c.number(cpu["speedInMHz"], mp + ".cpu.speedInMHz")
            if not 0 < mhz <= MAX_CPU_MHZ:
                raise c.err(mp + ".cpu.speedInMHz", f"must be in (0, {MAX_CPU_MHZ:g}], got {mhz}")
            out.speed[node] = mhz / REFERENCE_CPU_MHZ
    for k, et in enumerate(c.lst(exe.get("tasks", []), ep + ".tasks")):
        tp = f"{ep}.tasks[{k}]"
        et = c.obj(et, tp)
        tid = c.string(et.get("id"), tp + ".id")
        if "runtimeInSeconds" in et:
            rt = c.number(et["runtimeInSeconds"], tp + ".runtimeInSeconds")
            if rt > MAX_SECONDS:
                raise c.err(tp + ".runtimeInSeconds", f"must be <= {MAX_SECONDS:g}, got {rt}")
            out.runtime[tid] = rt
        ms = et.get("machines", et.get("machine"))
        if isinstance(ms, list) and ms and isinstance(ms[0], str):
            out.machine_of[tid] = ms[0]
        elif isinstance(ms, str):
            out.machine_of[tid] = ms
        if isinstance(et.get("category"), str) and et["category"]:
            out.category[tid] = et["category"]
    return out


def _task_ids(c: _Ctx, raw_tasks: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Every task's id (``id``, else ``name``; unique) and object, read before any
    dependency so that parents and children may point forward."""
    ids: list[str] = []
    seen: set[str] = set()
    objs: list[dict[str, Any]] = []
    for i, t in enumerate(raw_tasks):
        tp = f"{_TASKS}[{i}]"
        t = c.obj(t, tp)
        raw_id = t.get("id", t.get("name"))
        tid = c.string(raw_id, tp + ".id")
        if tid in seen:
            raise c.err(tp + ".id", f"duplicate task id {tid!r}")
        seen.add(tid)
        ids.append(tid)
        objs.append(t)
    return ids, objs


def _task_parents(c: _Ctx, ids: list[str], objs: list[dict[str, Any]]) -> list[list[int]]:
    """Each task's parents, from its own ``parents`` and the ``children`` of the others
    (either side may name an edge; each edge counts once)."""
    pos = {tid: i for i, tid in enumerate(ids)}
    parents: list[list[int]] = [[] for _ in ids]
    for i, t in enumerate(objs):
        tp = f"{_TASKS}[{i}]"
        for k, pid in enumerate(c.strings(t.get("parents", []), tp + ".parents")):
            if pid not in pos:
                raise c.err(f"{tp}.parents[{k}]", f"unknown task id {pid!r}")
            if pid == ids[i]:
                raise c.err(f"{tp}.parents[{k}]", f"task {pid!r} lists itself as a parent")
            if pos[pid] not in parents[i]:
                parents[i].append(pos[pid])
        for k, cid in enumerate(c.strings(t.get("children", []), tp + ".children")):
            if cid not in pos:
                raise c.err(f"{tp}.children[{k}]", f"unknown task id {cid!r}")
            if cid == ids[i]:
                raise c.err(f"{tp}.children[{k}]", f"task {cid!r} lists itself as a child")
            ch = pos[cid]
            if i not in parents[ch]:
                parents[ch].append(i)
    return parents


def _task_files(
    c: _Ctx, objs: list[dict[str, Any]], sizes: dict[str, Num]
) -> tuple[list[list[str]], list[list[str]]]:
    """Each task's input and output file ids, every one a declared file."""
    inputs: list[list[str]] = []
    outputs: list[list[str]] = []
    for i, t in enumerate(objs):
        tp = f"{_TASKS}[{i}]"
        for key, acc in (("inputFiles", inputs), ("outputFiles", outputs)):
            fl = c.strings(t.get(key, []), f"{tp}.{key}")
            for k, fid in enumerate(fl):
                if fid not in sizes:
                    raise c.err(f"{tp}.{key}[{k}]", f"unknown file id {fid!r} (not in {_FILES})")
            acc.append(fl)
    return inputs, outputs


def _edges_from_files(
    c: _Ctx,
    ids: list[str],
    parents: list[list[int]],
    inputs: list[list[str]],
    outputs: list[list[str]],
    sizes: dict[str, Num],
) -> list[Edge]:
    """One edge per dependency, its payload the files the parent writes and the child
    reads (a sum of fixed sizes, or one distributed size alone)."""
    edges: list[Edge] = []
    for i in range(len(ids)):
        ins = set(inputs[i])
        for p in sorted(parents[i]):
            shared = [f for f in outputs[p] if f in ins]
            nb: Num = 0.0
            if shared:
                vals = [sizes[f] for f in shared]
                if len(vals) == 1:
                    nb = vals[0]
                elif all(isinstance(v, float) for v in vals):
                    nb = float(sum(v for v in vals if isinstance(v, float)))
                else:
                    raise c.err(
                        f"{_TASKS}[{i}].inputFiles",
                        f"the edge from {ids[p]!r} carries several files and one has a size "
                        "distribution; a distributed payload must be the edge's only file",
                    )
            edges.append(Edge(ids[p], ids[i], nb))
    return edges


def _workflow_extension(c: _Ctx, wext_raw: Any, wpath: str) -> tuple[list[Rule], str]:
    """The workflow's ``scalesched`` object, if any: its dynamic rules and pattern label."""
    rules: list[Rule] = []
    pattern = ""
    if wext_raw is not None:
        wext = c.obj(wext_raw, wpath)
        if wext.get("pattern") is not None:
            pattern = c.string(wext["pattern"], wpath + ".pattern")
        for r, rule in enumerate(c.lst(wext.get("rules", []), wpath + ".rules")):
            rules.append(_parse_rule(c, rule, f"{wpath}.rules[{r}]"))
    return rules, pattern


_CAMEL = {
    "prompt_tokens": "promptTokens",
    "output_tokens": "outputTokens",
    "output_tokens_est": "outputTokensEst",
    "cpu_work": "cpuWork",
    "ext_latency": "extLatency",
    "ext_latency_est": "extLatencyEst",
    "revealed_by": "revealedBy",
    "difficulty_hint": "difficultyHint",
    "max_iter": "maxIter",
    "continue_prob": "continueProb",
    "carry_bytes": "carryBytes",
}


def _json_field(fld: str, rules_prefix: str) -> str:
    """Map a template field path (``tasks[3].cpu_work``) to its JSON path."""
    m = re.match(r"^tasks\[(\d+)\](.*)$", fld)
    if m:
        rest = m.group(2)
        if rest in ("", ".id"):
            return f"{_TASKS}[{m.group(1)}]{rest}"
        rest = rest.replace(".tool.options[", ".tool.choice[")
        for snake, camel in _CAMEL.items():
            rest = re.sub(rf"\.{snake}\b", f".{camel}", rest)
        return f"{_TASKS}[{m.group(1)}].{EXT}{rest}"
    if fld.startswith("rules"):
        for snake, camel in _CAMEL.items():
            fld = re.sub(rf"\.{snake}\b", f".{camel}", fld)
        return f"{rules_prefix}.{fld}"
    if fld.startswith("edges"):
        return _TASKS
    return fld


def _check_acyclic(c: _Ctx, ids: list[str], parents: list[list[int]]) -> None:
    # Kahn's algorithm; on failure, walk parents inside the remainder to show one cycle.
    n = len(ids)
    indeg = [len(p) for p in parents]
    children: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(parents):
        for u in ps:
            children[u].append(v)
    stack = [v for v in range(n) if indeg[v] == 0]
    done = 0
    while stack:
        u = stack.pop()
        done += 1
        for v in children[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    if done == n:
        return
    left = {v for v in range(n) if indeg[v] > 0}
    v = min(left)
    seen: list[int] = []
    while v not in seen:
        seen.append(v)
        v = next(p for p in parents[v] if p in left)
    cyc = seen[seen.index(v) :]
    cyc.reverse()  # now each task is followed by one of its children
    k = cyc.index(min(cyc))
    cyc = cyc[k:] + cyc[:k]  # start at the earliest task: its parents hold the closing edge
    names = " -> ".join(ids[x] for x in [*cyc, cyc[0]])
    raise c.err(f"{_TASKS}[{cyc[0]}].parents", f"the dependencies form a cycle: {names}")


def _parse_task(
    c: _Ctx,
    i: int,
    t: dict[str, Any],
    tid: str,
    runtime: Mapping[str, float],
    machine_of: Mapping[str, str],
    speed: Mapping[str, float],
    category: Mapping[str, str],
) -> TaskTemplate:
    """One task: a plain WfCommons task becomes a CPU tool task (its measured work); the
    ``scalesched`` extension makes it an LLM call or a tool task of its own."""
    tp = f"{_TASKS}[{i}]"
    base_work = runtime.get(tid, 0.0) * speed.get(machine_of.get(tid, ""), 1.0)
    ext_raw = t.get(EXT)
    if ext_raw is None:
        cat = t.get("category", category.get(tid))
        if not isinstance(cat, str) or not cat:
            nm = t.get("name", tid)
            nm = nm if isinstance(nm, str) and nm else tid
            cat = _SUFFIX.sub("", nm) or nm
        return TaskTemplate(id=tid, kind="tool", tool=f"wfcommons:{cat}", cpu_work=base_work)
    ep = f"{tp}.{EXT}"
    x = c.obj(ext_raw, ep)
    common = _task_extension_common(c, x, ep)
    if common.kind == "llm":
        return _llm_task(c, x, ep, tid, common)
    tool = _parse_tool(c, x.get("tool"), ep)
    return TaskTemplate(
        id=tid,
        kind="tool",
        tool=tool,
        cpu_work=common.cpu if "cpuWork" in x else base_work,
        ext_latency=common.ext,
        ext_latency_est=common.ext_est,
        revealed_by=common.revealed_by,
        difficulty_hint=common.hint,
    )


@dataclass(frozen=True, slots=True)
class _TaskExt:
    """The extension fields every task kind shares."""

    kind: str
    revealed_by: str | None
    cpu: Num
    ext: Num
    ext_est: float | None
    hint: float | None


def _task_extension_common(c: _Ctx, x: dict[str, Any], ep: str) -> _TaskExt:
    """Kind, static reveal, cpu work, external latency (and its estimate), difficulty
    hint: read in this order, so the first bad field is the one reported."""
    kind = x.get("kind", "tool")
    if kind not in ("llm", "tool"):
        raise c.err(ep + ".kind", f"unknown kind {kind!r}; known: 'llm', 'tool'")
    revealed_by = (
        None if x.get("revealedBy") is None else c.string(x["revealedBy"], ep + ".revealedBy")
    )
    cpu: Num = _parse_num(c, x["cpuWork"], ep + ".cpuWork") if "cpuWork" in x else 0.0
    ext: Num = _parse_num(c, x["extLatency"], ep + ".extLatency") if "extLatency" in x else 0.0
    ext_est = (
        None
        if x.get("extLatencyEst") is None
        else c.number(x["extLatencyEst"], ep + ".extLatencyEst")
    )
    hint = (
        None
        if x.get("difficultyHint") is None
        else c.number(x["difficultyHint"], ep + ".difficultyHint", nonneg=False)
    )
    if hint is not None and abs(hint) > MAX_HINT:
        raise c.err(ep + ".difficultyHint", f"must be within +-{MAX_HINT:g} (a log ratio)")
    return _TaskExt(kind, revealed_by, cpu, ext, ext_est, hint)


def _llm_task(c: _Ctx, x: dict[str, Any], ep: str, tid: str, common: _TaskExt) -> TaskTemplate:
    """An LLM call: a known model, and token counts given or taken from a known role."""
    model = c.string(x.get("model"), ep + ".model")
    models = known_models()
    if model not in models:
        raise c.err(ep + ".model", f"unknown model {model!r}; known: {', '.join(models)}")
    role = None if x.get("role") is None else c.string(x["role"], ep + ".role")
    role_def = None
    if role is not None:
        from scalesched.workload.roles import ROLES

        role_def = ROLES.get(role)
    prompt: Tokens
    output: Tokens
    if "promptTokens" in x:
        prompt = _parse_tokens(c, x["promptTokens"], ep + ".promptTokens")
    elif role_def is not None:
        prompt = role_def.prompt
    else:
        raise c.err(ep + ".promptTokens", "missing (give promptTokens or a known role)")
    if "outputTokens" in x:
        output = _parse_tokens(c, x["outputTokens"], ep + ".outputTokens")
    elif role_def is not None:
        output = role_def.output
    else:
        raise c.err(ep + ".outputTokens", "missing (give outputTokens or a known role)")
    out_est = (
        None
        if x.get("outputTokensEst") is None
        else c.integer(x["outputTokensEst"], ep + ".outputTokensEst")
    )
    return TaskTemplate(
        id=tid,
        kind="llm",
        model=model,
        role=role,
        prompt_tokens=prompt,
        output_tokens=output,
        output_tokens_est=out_est,
        cpu_work=common.cpu,
        ext_latency=common.ext,
        ext_latency_est=common.ext_est,
        revealed_by=common.revealed_by,
        difficulty_hint=common.hint,
    )


def _parse_tool(c: _Ctx, tool_raw: Any, ep: str) -> str | ToolChoice:
    """A tool name, or ``{"choice": [...]}``: named, positively weighted options that may
    override the task's cpu work and external latency."""
    if not isinstance(tool_raw, dict):
        return c.string(tool_raw, ep + ".tool")
    opts = []
    cp = ep + ".tool.choice"
    for k, o in enumerate(c.lst(tool_raw.get("choice"), cp)):
        op = f"{cp}[{k}]"
        o = c.obj(o, op)
        w = c.number(o.get("weight"), op + ".weight")
        if w <= 0:
            raise c.err(op + ".weight", f"must be > 0, got {w}")
        opts.append(
            ToolOption(
                c.string(o.get("name"), op + ".name"),
                w,
                _parse_num(c, o["cpuWork"], op + ".cpuWork") if "cpuWork" in o else None,
                _parse_num(c, o["extLatency"], op + ".extLatency") if "extLatency" in o else None,
            )
        )
    if not opts:
        raise c.err(cp, "a tool choice needs at least one option")
    return ToolChoice(tuple(opts))


def _parse_rule(c: _Ctx, raw: Any, rp: str) -> Rule:
    r = c.obj(raw, rp)
    typ = r.get("type")
    decider = c.string(r.get("decider"), rp + ".decider")
    if typ == "fanout":
        if "width" not in r:
            raise c.err(rp + ".width", "missing")
        return FanOut(
            decider,
            tuple(c.strings(r.get("body"), rp + ".body")),
            _parse_width(c, r["width"], rp + ".width"),
        )
    if typ == "branch":
        opts = []
        for k, o in enumerate(c.lst(r.get("options"), rp + ".options")):
            op = f"{rp}.options[{k}]"
            o = c.obj(o, op)
            opts.append(
                BranchOption(
                    c.number(o.get("prob"), op + ".prob"),
                    tuple(c.strings(o.get("tasks", []), op + ".tasks")),
                )
            )
        return Branch(decider, tuple(opts))
    if typ == "loop":
        max_iter = c.integer(r.get("maxIter"), rp + ".maxIter", minimum=1)
        cp = c.number(r.get("continueProb"), rp + ".continueProb")
        if cp > 1:
            raise c.err(rp + ".continueProb", f"must be in [0, 1], got {cp}")
        carry = _parse_num(c, r["carryBytes"], rp + ".carryBytes") if "carryBytes" in r else 0.0
        return Loop(decider, tuple(c.strings(r.get("body"), rp + ".body")), max_iter, cp, carry)
    raise c.err(rp + ".type", f"unknown rule type {typ!r}; known: 'fanout', 'branch', 'loop'")


# --------------------------------------------------------------------------- saving


def save_workflow(workflow: WorkflowTemplate | WorkflowInstance, path: str | Path) -> None:
    """Write a template or a realised instance as a WfFormat 1.5 file with the extension."""
    doc = workflow_to_wfformat(workflow)
    Path(path).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def workflow_to_wfformat(workflow: WorkflowTemplate | WorkflowInstance) -> dict[str, Any]:
    if isinstance(workflow, WorkflowInstance):
        return _instance_doc(workflow)
    return _template_doc(workflow)


def _file_id(src: str, dst: str, used: set[str]) -> str:
    base = f"{src}__{dst}"
    fid, k = base, 1
    while fid in used:
        fid, k = f"{base}.{k}", k + 1
    used.add(fid)
    return fid


def _file_entry(fid: str, nb: Num) -> dict[str, Any]:
    est = nb if isinstance(nb, float) else nb.estimate
    entry: dict[str, Any] = {"id": fid, "sizeInBytes": int(round(est))}
    if not isinstance(nb, float) or float(int(round(nb))) != nb:
        entry[EXT] = {"size": _dump_num(nb)}
    return entry


def _doc(
    name: str,
    description: str,
    ids: list[str],
    exts: list[dict[str, Any]],
    edges: list[tuple[int, int, Num]],
    runtimes: list[float],
    wext: dict[str, Any],
) -> dict[str, Any]:
    n = len(ids)
    parents: list[list[str]] = [[] for _ in range(n)]
    children: list[list[str]] = [[] for _ in range(n)]
    ins: list[list[str]] = [[] for _ in range(n)]
    outs: list[list[str]] = [[] for _ in range(n)]
    files: list[dict[str, Any]] = []
    used: set[str] = set()
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v, nb in edges:
        parents[v].append(ids[u])
        children[u].append(ids[v])
        pred[v].append(u)
        if isinstance(nb, float) and nb == 0.0:
            continue
        fid = _file_id(ids[u], ids[v], used)
        outs[u].append(fid)
        ins[v].append(fid)
        files.append(_file_entry(fid, nb))
    tasks = []
    for i in range(n):
        tasks.append(
            {
                "name": ids[i],
                "id": ids[i],
                "parents": parents[i],
                "children": children[i],
                "inputFiles": ins[i],
                "outputFiles": outs[i],
                EXT: exts[i],
            }
        )
    # Informational execution record: tool tasks' expected CPU + external seconds.
    finish = [0.0] * n
    order = _topo(n, pred)
    for v in order:
        finish[v] = runtimes[v] + max((finish[u] for u in pred[v]), default=0.0)
    doc: dict[str, Any] = {"name": name}
    if description:
        doc["description"] = description
    doc["schemaVersion"] = SCHEMA_VERSION
    doc["workflow"] = {
        "specification": {"tasks": tasks, "files": files},
        "execution": {
            "makespanInSeconds": max(finish, default=0.0),
            "executedAt": "1970-01-01T00:00:00+00:00",
            "tasks": [{"id": ids[i], "runtimeInSeconds": runtimes[i]} for i in range(n)],
        },
        EXT: wext,
    }
    return doc


def _topo(n: int, pred: list[list[int]]) -> list[int]:
    indeg = [len(p) for p in pred]
    succ: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        for u in pred[v]:
            succ[u].append(v)
    out = [v for v in range(n) if indeg[v] == 0]
    k = 0
    while k < len(out):
        for v in succ[out[k]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                out.append(v)
        k += 1
    return out


def _num_est(v: Num) -> float:
    return v if isinstance(v, float) else v.estimate


def _task_ext(t: TaskTemplate) -> tuple[dict[str, Any], float]:
    x: dict[str, Any] = {"kind": t.kind}
    runtime = 0.0
    if t.kind == "llm":
        x["model"] = t.model
        if t.role is not None:
            x["role"] = t.role
        x["promptTokens"] = _dump_tokens(t.prompt_tokens)
        x["outputTokens"] = _dump_tokens(t.output_tokens)
        if t.output_tokens_est is not None:
            x["outputTokensEst"] = t.output_tokens_est
    else:
        if isinstance(t.tool, ToolChoice):
            opts = []
            for o in t.tool.options:
                od: dict[str, Any] = {"name": o.name, "weight": o.weight}
                if o.cpu_work is not None:
                    od["cpuWork"] = _dump_num(o.cpu_work)
                if o.ext_latency is not None:
                    od["extLatency"] = _dump_num(o.ext_latency)
                opts.append(od)
            x["tool"] = {"choice": opts}
            w = sum(o.weight for o in t.tool.options)
            runtime = sum(
                o.weight
                / w
                * (
                    _num_est(o.cpu_work if o.cpu_work is not None else t.cpu_work)
                    + _num_est(o.ext_latency if o.ext_latency is not None else t.ext_latency)
                )
                for o in t.tool.options
            )
        else:
            x["tool"] = t.tool
            runtime = _num_est(t.cpu_work) + _num_est(t.ext_latency)
    if t.kind == "tool" or t.cpu_work != 0.0:
        x["cpuWork"] = _dump_num(t.cpu_work)
    if t.kind == "tool" or t.ext_latency != 0.0:
        x["extLatency"] = _dump_num(t.ext_latency)
    if t.ext_latency_est is not None:
        x["extLatencyEst"] = t.ext_latency_est
    if t.difficulty_hint is not None:
        x["difficultyHint"] = t.difficulty_hint
    if t.revealed_by is not None:
        x["revealedBy"] = t.revealed_by
    return x, runtime


def _dump_rule(r: Rule) -> dict[str, Any]:
    if isinstance(r, FanOut):
        return {
            "type": "fanout",
            "decider": r.decider,
            "body": list(r.body),
            "width": _dump_width(r.width),
        }
    if isinstance(r, Branch):
        return {
            "type": "branch",
            "decider": r.decider,
            "options": [{"prob": o.prob, "tasks": list(o.tasks)} for o in r.options],
        }
    out: dict[str, Any] = {
        "type": "loop",
        "decider": r.decider,
        "body": list(r.body),
        "maxIter": r.max_iter,
        "continueProb": r.continue_prob,
    }
    if r.carry_bytes != 0.0:
        out["carryBytes"] = _dump_num(r.carry_bytes)
    return out


def _template_doc(t: WorkflowTemplate) -> dict[str, Any]:
    index = {task.id: i for i, task in enumerate(t.tasks)}
    ids = [task.id for task in t.tasks]
    exts, runtimes = [], []
    for task in t.tasks:
        x, rt = _task_ext(task)
        exts.append(x)
        runtimes.append(rt)
    edges = [(index[e.src], index[e.dst], e.nbytes) for e in t.edges]
    wext: dict[str, Any] = {"pattern": t.pattern, "rules": [_dump_rule(r) for r in t.rules]}
    return _doc(t.name, t.description, ids, exts, edges, runtimes, wext)


def _instance_doc(w: WorkflowInstance) -> dict[str, Any]:
    ids = [t.id for t in w.tasks]
    exts: list[dict[str, Any]] = []
    runtimes: list[float] = []
    for t in w.tasks:
        x: dict[str, Any] = {"kind": t.kind}
        if t.kind == "llm":
            x["model"] = t.model
            x["promptTokens"] = t.prompt_tokens
            x["outputTokens"] = t.output_tokens
            x["outputTokensEst"] = t.output_tokens_est
            if t.role is not None:
                x["role"] = t.role
            runtimes.append(0.0)
        else:
            x["tool"] = t.tool
            runtimes.append(t.cpu_work + t.ext_latency)
        if t.kind == "tool" or t.cpu_work != 0.0:
            x["cpuWork"] = t.cpu_work
        if t.kind == "tool" or t.ext_latency != 0.0:
            x["extLatency"] = t.ext_latency
        x["extLatencyEst"] = t.ext_latency_est
        x["difficultyHint"] = t.difficulty_hint
        if t.revealed_by is not None:
            x["revealedBy"] = ids[t.revealed_by]
        exts.append(x)
    edges: list[tuple[int, int, Num]] = []
    for v, ps in enumerate(w.parents):
        for u in ps:
            edges.append((u, v, float(w.edge_bytes.get((u, v), 0.0))))
    wext: dict[str, Any] = {"pattern": w.pattern, "rules": []}
    return _doc(w.name, "", ids, exts, edges, runtimes, wext)
