"""Trained policies shipped with the package, usable by name wherever a policy is taken.

Each ``<name>.pt`` is a checkpoint (weights, network config, training config, seed) with
its training curve ``<name>.train.csv`` beside it; docs/model-card.md describes them.
"""

from __future__ import annotations

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


def load_trained(name: str) -> Scheduler | None:
    """A trained policy by shipped name or checkpoint path (torch is imported only here);
    None when ``name`` is neither."""
    shipped = shipped_policies()
    if name not in shipped and not (name.endswith(".pt") or Path(name).is_file()):
        return None
    from scalesched.nn.scheduler import load_scheduler

    if name in shipped:
        return load_scheduler(shipped[name], name=name)
    path = Path(name).resolve()
    own = [k for k, v in shipped.items() if v.resolve() == path]
    return load_scheduler(name, name=own[0] if own else name)
