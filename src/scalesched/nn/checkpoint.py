"""Checkpoints: config, weights and metadata in one file, written atomically.

Everything is stored as tensors and plain Python values, so loading uses
``torch.load(weights_only=True)`` and never unpickles code from a file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from scalesched.errors import InputError

FORMAT = "scalesched-checkpoint-v1"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (plus the format tag) to ``path`` via a temp file and a rename.

    The file's data is fsynced before the rename and the folder after it, so a crash (or a
    power cut) leaves either the old checkpoint or the new one, never a torn or empty file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save({"format": FORMAT, **payload}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a checkpoint is not a secret
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint, failing with a one-line InputError on a missing or wrong file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "file", "checkpoint not found")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for corrupt files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(str(p), "file", f"not a readable checkpoint ({first[:160]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(str(p), "format", f"not a scalesched checkpoint (expected {FORMAT})")
    for key in ("network", "network_config", "state_dict"):
        if key not in data:
            raise InputError(str(p), key, "missing from checkpoint")
    return data
