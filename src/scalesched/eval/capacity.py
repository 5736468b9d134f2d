"""Deprecated alias of :mod:`scalesched.runs.capacity` (moved after 0.1.0, removed in 0.3.0)."""

from __future__ import annotations

import warnings

from scalesched.runs.capacity import (
    CapacityResult,
    cache_key,
    cached_entry,
    capacity_wps,
    measure_capacity,
    store_result,
)
from scalesched.runs.windows import default_cooldown, default_warmup

warnings.warn(
    "scalesched.eval.capacity moved to scalesched.runs.capacity; the old name goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "CapacityResult",
    "cache_key",
    "cached_entry",
    "capacity_wps",
    "default_cooldown",
    "default_warmup",
    "measure_capacity",
    "store_result",
]
