"""Trained policies shipped with the package, usable by name wherever a policy is taken.

Each ``<name>.pt`` is a checkpoint (weights, network config, training config, seed) with
its training curve ``<name>.train.csv`` beside it; docs/model-card.md describes them.
``cards.json`` holds each one's card: what it was trained on, as its checkpoint records it
(:func:`training_facts`, written by scripts/derive/policy_cards.py), and its measured
headline from the model card; :func:`describe` makes its line in ``scalesched policies``.
A trained policy takes the options of :class:`ActingOptions` where it is named
(``scale-dagger:greedy=true``), as a heuristic takes its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from scalesched.errors import InputError
from scalesched.policies.bounded import Bound, Loads, ScoreMargin

if TYPE_CHECKING:
    from scalesched.decision.scheduler import Scheduler


def shipped_policies() -> dict[str, Path]:
    """Name -> checkpoint path of every shipped trained policy."""
    root = resources.files(__name__)
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in root.iterdir()
        if entry.name.endswith(".pt")
    }


CARDS = "cards.json"
"""The shipped policies' cards, beside the checkpoints."""


def training_facts(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """What a checkpoint (as :func:`scalesched.nn.checkpoint.load_checkpoint` returns it)
    records about its training, as plain data: the algorithm, for expert iteration the
    expert and the starting policy, the network, SRR, the output lengths it was shown, and
    each training setting as ``[cluster, workload, load]`` (a PPO run's loads as the range
    its episodes draw from), and the worlds it was trained in (``residency``, joined by
    ``+`` where settings differ; a checkpoint from before the field was trained with
    dynamic residency)."""
    config = checkpoint.get("config") or {}
    network = checkpoint.get("network_config") or {}
    dagger = (checkpoint.get("metadata") or {}).get("algorithm") == "dagger"
    settings = [config, *(config.get("more_settings") or [])]
    ppo_loads = f"{config.get('load_min')}-{config.get('load_max')}"
    return {
        "algorithm": "expert iteration" if dagger else "PPO",
        "expert": config.get("expert") if dagger else None,
        "init": config.get("init") if dagger else None,
        "network": checkpoint.get("network"),
        "scalable_softmax": bool(network.get("scalable_softmax")),
        "srr": bool(config.get("srr_decorrelation") or config.get("srr_kl"))
        if dagger
        else bool(config.get("srr")),
        "observed_tokens": checkpoint.get("observed_tokens") or "estimate",
        "settings": [
            [Path(str(s["cluster"])).stem, s["workload"], str(s["load"]) if dagger else ppo_loads]
            for s in settings
        ],
        "residency": "+".join(
            sorted(
                {str(s.get("residency") or config.get("residency") or "dynamic") for s in settings}
            )
        ),
    }


@cache
def cards() -> dict[str, dict[str, Any]]:
    """Name -> card (``trained``: :func:`training_facts` of the checkpoint; ``measured``:
    its headline, dated) of every shipped policy that has one."""
    text = resources.files(__name__).joinpath(CARDS).read_text(encoding="utf-8")
    return dict(json.loads(text)["policies"])


def shipped_acting(name: str) -> dict[str, Any]:
    """How a shipped policy acts unless its options say otherwise (its card's ``acting``,
    e.g. ``{"margin": 0.1}`` for a policy shipped bounded); empty for any other name."""
    return dict(cards().get(name, {}).get("acting") or {})


def describe(name: str) -> str:
    """One line for a shipped policy: how and on what it was trained, and its measured
    headline; a generic line for a policy without a card."""
    card = cards().get(name)
    if card is None:
        return "shipped trained policy (see docs/model-card.md)"
    t = card["trained"]
    if t["algorithm"] == "expert iteration":
        expert = "each setting's best heuristic" if t["expert"] == "best" else t["expert"]
        how = f"expert iteration towards {expert} from {t['init']}"
    else:
        how = "PPO with SRR" if t["srr"] else "PPO without SRR"
    if t["network"] == "mlp16":
        how += ", an MLP over exactly 16 servers"
    elif t["scalable_softmax"]:
        how += ", scalable-softmax attention"
    if t["observed_tokens"] != "estimate":
        how += f", shown {t['observed_tokens']} output lengths"
    loads: dict[str, dict[str, list[str]]] = {}  # cluster -> workload -> loads
    for cluster, workload, load in t["settings"]:
        loads.setdefault(cluster, {}).setdefault(workload, []).append(load)
    where = "; ".join(
        f"{cluster}: "
        + ", ".join(
            f"{w} at load{'s' if len(ls) > 1 or '-' in ls[0] else ''} {' and '.join(ls)}"
            for w, ls in workloads.items()
        )
        for cluster, workloads in loads.items()
    )
    world = {
        "dynamic": "dynamic residency",
        "planned": "planned deployments",
        "dynamic+planned": "planned deployments and dynamic residency",
    }
    where += f" ({world.get(t.get('residency', 'dynamic'), t.get('residency'))})"
    acting = card.get("acting") or {}
    if "margin" in acting:
        best = {
            "tail": "tail's best",
            "eft": "eft's best",
            "auto": "tail's best (eft's where tail's model load would wait for GPUs)",
        }[acting.get("bound", "tail")]
        where += f"; acts within margin {acting['margin']:g} of {best}"
    if acting.get("order") == "workflow":
        cap = acting.get("age_cap_s")
        where += ", oldest workflow first" + (f" (age counted up to {cap:g} s)" if cap else "")
    if acting.get("loads") == "free":
        where += ", starting a model load only where its bound would or where it evicts nothing,"
    if acting.get("loads") == "eft":
        where += ", starting a model load only where eft would,"
    if acting:
        where += " unless told otherwise"
    return f"{how}, on {where}. Measured: {card['measured']}"


def checkpoint_path(name_or_path: str) -> Path:
    """A shipped policy's checkpoint by name, else the string as a path."""
    return shipped_policies().get(name_or_path, Path(name_or_path))


@dataclass(frozen=True)
class ActingOptions:
    """How a trained policy acts on its network's distribution over servers."""

    greedy: bool = False
    """Place on the most likely server instead of a draw from the distribution (ties go
    to the lowest index)."""
    margin: float | None = None
    """Choose only among the servers ``tail`` scores within this fraction of its best
    (``scale-dagger:margin=0.1``; :mod:`scalesched.policies.bounded`); None: every
    feasible server."""
    bound: Bound = "tail"
    """The heuristic whose score the margin is measured from: ``tail``, ``eft``
    (``scale-safe:bound=eft``) or ``auto``, ``tail`` but where its pick would wait for GPUs
    to load the call's model, ``eft``."""
    loads: Loads = "any"
    """With a margin: ``bound`` lets the network start only the model loads the bounding
    heuristic's own pick would start; ``free``, those and the loads that evict no engine;
    ``eft``, only where ``eft``'s pick would start one
    (:class:`scalesched.policies.bounded.ScoreMargin`)."""
    order: Literal["own", "workflow"] = "own"
    """The admission order of its calls where they queue: ``own``, the order they reach the
    engine; ``workflow``, older workflows' calls first, as ``fcfs_workflow`` admits
    (:mod:`scalesched.policies.ordering`)."""
    age_cap_s: float | None = None
    """With ``order=workflow``: the most a workflow's age puts its calls ahead
    (``fcfs_workflow``'s ``age_cap_s``); None: no cap."""

    def __post_init__(self) -> None:
        from scalesched.policies.bounded import check_bound, check_margin

        if self.margin is not None:
            check_margin(self.margin)
        check_bound(self.bound)
        if self.margin is None and self.bound != "tail":
            raise ValueError(f"bound={self.bound} needs a margin (margin=0.1, say)")
        if self.margin is None and self.loads != "any":
            raise ValueError(f"loads={self.loads} needs a margin (margin=0.1, say)")
        if self.age_cap_s is not None and self.order != "workflow":
            raise ValueError("age_cap_s needs order=workflow")
        if self.age_cap_s is not None and not self.age_cap_s >= 0:
            raise ValueError(f"age_cap_s must be at least 0, got {self.age_cap_s}")

    def candidate_set(self) -> ScoreMargin | None:
        """The servers a network acting with these options may choose among: the bounded set
        of its ``margin`` (None without one: every feasible server)."""
        if self.margin is None:
            return None
        return ScoreMargin(self.margin, self.bound, self.loads)


def load_trained(spec: str) -> Scheduler | None:
    """A trained policy's network by shipped name or checkpoint path, acting with
    :class:`ActingOptions` given as ``NAME:KEY=VALUE``; None when the name is neither. Its
    admission ``order`` is the caller's to apply (:func:`load_trained_acting`)."""
    loaded = load_trained_acting(spec)
    return None if loaded is None else loaded[0]


def load_trained_acting(spec: str) -> tuple[Scheduler, ActingOptions] | None:
    """:func:`load_trained`'s network (torch is imported only here) and the options it acts
    with, so that ``policies.get_policy`` admits its calls in the order they name."""
    from scalesched.policies.options import parse_options, split_spec

    shipped = shipped_policies()
    name, options = (spec, None) if Path(spec).is_file() else split_spec(spec)
    if name not in shipped and not (name.endswith(".pt") or Path(name).is_file()):
        return None
    given = parse_options(name, ActingOptions, options) if options else {}
    shipped_as = shipped_acting(name)
    if given.get("order") == "own":  # its own order drops the shipped cap on the other
        shipped_as.pop("age_cap_s", None)
    try:
        acting = ActingOptions(**{**shipped_as, **given})
    except ValueError as exc:
        raise InputError("--policy", name, str(exc)) from None
    from scalesched.nn.scheduler import load_scheduler

    if name in shipped:
        path, label = shipped[name], name
    else:
        own = [k for k, v in shipped.items() if v.resolve() == Path(name).resolve()]
        path, label = Path(name), own[0] if own else name
    if given:  # named by the options given, as a heuristic with options is
        label += ":" + ",".join(f"{k}={v}" for k, v in given.items())
    network = load_scheduler(
        path, greedy=acting.greedy, name=label, candidates=acting.candidate_set()
    )
    return network, acting
