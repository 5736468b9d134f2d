"""Session-wide test settings.

Measured capacity (``--load``) is cached per user; tests get a cache of their own so they
neither read a developer's measurements nor write into their home folder. Presets the
tests use are in the table shipped with the package; other clusters are measured with short
runs (the method is the same, its precision lower), which is all a test that needs *a*
load needs. tests/eval/test_capacity.py checks the method itself.
"""

from __future__ import annotations

import os
import tempfile

_CACHE = tempfile.mkdtemp(prefix="scalesched-test-cache-")
os.environ.setdefault("SCALESCHED_CACHE_DIR", _CACHE)
os.environ.setdefault("SCALESCHED_CAPACITY_WORKFLOWS", "300")


RAY_MODULES = ("tests/runtime/test_runtime_ray.py",)


def pytest_collection_modifyitems(config: object, items: list) -> None:  # type: ignore[type-arg]
    """Mark the tests that start a Ray cluster (``-m "not ray"`` skips them locally)."""
    import pytest

    for item in items:
        path = str(item.path).replace("\\", "/")
        if path.endswith(RAY_MODULES) or "over_ray" in item.name or "ray_local" in item.name:
            item.add_marker(pytest.mark.ray)
