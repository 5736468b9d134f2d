"""Small instances for the memory planner's tests (shared with the study)."""

from __future__ import annotations

from scalesched.memplan.study import small_instance

__all__ = ["small_instance"]
