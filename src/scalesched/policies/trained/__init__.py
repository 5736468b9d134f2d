"""Trained policies shipped with the package, usable by name wherever a policy is taken.

Each ``<name>.pt`` is a checkpoint (weights, network config, training config, seed) with
its training curve ``<name>.train.csv`` beside it; docs/model-card.md describes them.
A trained policy takes the options of :class:`ActingOptions` where it is named
(``scale-dagger:greedy=true``), as a heuristic takes its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

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


def checkpoint_path(name_or_path: str) -> Path:
    """A shipped policy's checkpoint by name, else the string as a path."""
    return shipped_policies().get(name_or_path, Path(name_or_path))


@dataclass(frozen=True)
class ActingOptions:
    """How a trained policy acts on its network's distribution over servers."""

    greedy: bool = False
    """Place on the most likely server instead of a draw from the distribution (ties go
    to the lowest index)."""


def load_trained(spec: str) -> Scheduler | None:
    """A trained policy by shipped name or checkpoint path, with :class:`ActingOptions` as
    ``NAME:KEY=VALUE`` (torch is imported only here); None when the name is neither."""
    from scalesched.policies.options import parse_options, split_spec

    shipped = shipped_policies()
    name, options = (spec, None) if Path(spec).is_file() else split_spec(spec)
    if name not in shipped and not (name.endswith(".pt") or Path(name).is_file()):
        return None
    acting = ActingOptions(**parse_options(name, ActingOptions, options)) if options else None
    from scalesched.nn.scheduler import load_scheduler

    if name in shipped:
        path, label = shipped[name], name
    else:
        own = [k for k, v in shipped.items() if v.resolve() == Path(name).resolve()]
        path, label = Path(name), own[0] if own else name
    if acting is not None:  # named by its options, as a heuristic with options is
        label += ":" + ",".join(f"{k}={v}" for k, v in asdict(acting).items())
    return load_scheduler(path, greedy=acting is not None and acting.greedy, name=label)
