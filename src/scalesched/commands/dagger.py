"""``scalesched train`` for a config with ``algorithm: dagger``: expert iteration
(:mod:`scalesched.train.dagger`), with a line of figures per iteration."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from scalesched.commands.common import console, err_console
from scalesched.errors import InputError

if TYPE_CHECKING:
    from scalesched.train.dagger import DaggerConfig


def train_dagger(
    config: Path,
    out: Path | None,
    *,
    seed: int | None,
    overrides: list[str],
    steps: int | None,
    resume: bool,
) -> None:
    """Run expert iteration from ``config`` into ``out`` (None: the config's own ``out``),
    refusing PPO-only options."""
    from scalesched.train.config_file import parse_overrides
    from scalesched.train.dagger import BEST, DaggerConfig, load_config, train

    if steps is not None:
        raise InputError("--steps", "steps", "applies to PPO; a dagger config sets iterations")
    if resume:
        raise InputError("--resume", "resume", "expert iteration cannot resume; start a new --out")
    known = [f.name for f in dataclasses.fields(DaggerConfig)]
    given = None if out is None else str(out)
    cfg = load_config(config, set_fields=parse_overrides(overrides, known), seed=seed, out=given)
    out = Path(cfg.out)
    if (out / "last.pt").exists():
        raise InputError(str(out), "--out", "holds a run already; pass a new folder")
    err_console.print(header(cfg), markup=False)
    rows = train(cfg, progress=lambda line: err_console.print(line, markup=False))
    best = min(rows, key=lambda r: r["validation_ratio"])
    yardstick = (
        "each validation setting's best heuristic" if cfg.expert == BEST else f"{cfg.expert}'s base"
    )
    console.print(
        f"done: {len(rows)} iterations; best validation ratio to {yardstick} "
        f"{best['validation_ratio']:.3f} (iteration {int(best['iteration'])}); checkpoints in "
        f"{out}/best.pt and {out}/last.pt"
    )


def header(cfg: DaggerConfig) -> str:
    """What the run trains on, labels from and selects on, in one line."""
    from scalesched.train.config_file import world_line
    from scalesched.train.dagger import BEST, settings_of, validation_settings, worlds_of

    settings = settings_of(cfg)
    worlds = worlds_of(cfg)
    where = (
        f"{cfg.cluster} ({cfg.workload}, load {cfg.load})"
        if len(settings) == 1
        else f"{len(settings)} settings"
    )
    labels = "each setting's best heuristic" if cfg.expert == BEST else cfg.expert
    held_out = (
        f"; checkpoint chosen on {len(validation_settings(cfg))} held-out settings"
        if cfg.selection_settings
        else ""
    )
    world = world_line(worlds[0]) if len(worlds) == 1 else " and ".join(worlds) + " by setting"
    return (
        f"expert iteration: {cfg.iterations} iterations x {cfg.episodes} episodes of "
        f"{cfg.workflows} workflows on {where}, labels from {labels}{held_out}; world: {world}"
    )
