"""``scalesched train`` for a config with ``algorithm: dagger``: expert iteration
(:mod:`scalesched.train.dagger`), with a line of figures per iteration."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scalesched.commands.common import console, err_console
from scalesched.errors import InputError


def train_dagger(
    config: Path,
    out: Path,
    *,
    seed: int | None,
    overrides: list[str],
    steps: int | None,
    resume: bool,
) -> None:
    """Run expert iteration from ``config`` into ``out`` (refusing PPO-only options)."""
    from scalesched.train.config_file import parse_overrides, world_line
    from scalesched.train.dagger import DaggerConfig, load_config, train

    if steps is not None:
        raise InputError("--steps", "steps", "applies to PPO; a dagger config sets iterations")
    if resume:
        raise InputError("--resume", "resume", "expert iteration cannot resume; start a new --out")
    if (out / "last.pt").exists():
        raise InputError(str(out), "--out", "holds a run already; pass a new folder")
    known = [f.name for f in dataclasses.fields(DaggerConfig)]
    cfg = load_config(config, set_fields=parse_overrides(overrides, known), seed=seed, out=str(out))
    err_console.print(
        f"expert iteration: {cfg.iterations} iterations x {cfg.episodes} episodes of "
        f"{cfg.workflows} workflows on {cfg.cluster} ({cfg.workload}, load {cfg.load}), "
        f"labels from {cfg.expert}; world: {world_line(cfg.residency)}",
        markup=False,
    )
    rows = train(cfg, progress=lambda line: err_console.print(line, markup=False))
    best = min(rows, key=lambda r: r["validation_ratio"])
    console.print(
        f"done: {len(rows)} iterations; best validation ratio to {cfg.expert}'s base "
        f"{best['validation_ratio']:.3f} (iteration {int(best['iteration'])}); checkpoints in "
        f"{out}/best.pt and {out}/last.pt"
    )
