"""Session-wide test settings.

Measured capacity (``--load``) is cached per user; tests get a cache of their own so they
neither read a developer's measurements nor write into their home folder. Presets the
tests use are in the table shipped with the package; other clusters are measured with the fast
method and short runs (lower precision), which is all a test that needs *a* load needs.
tests/runs/test_capacity.py checks the methods themselves.

Property tests (hypothesis) draw new examples on every local run, which is how they find
bugs; under CI (``CI`` set) every one of them is derandomized, so that the run that decides
whether a change lands tests the same cases each time and a red CI is the change's.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import settings

_CACHE = tempfile.mkdtemp(prefix="scalesched-test-cache-")
os.environ.setdefault("SCALESCHED_CACHE_DIR", _CACHE)
os.environ.setdefault("SCALESCHED_CAPACITY_WORKFLOWS", "300")

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


RAY_MODULES = ("tests/runtime/test_runtime_ray.py",)


def pytest_collection_modifyitems(config: object, items: list) -> None:  # type: ignore[type-arg]
    """Mark the tests that start a Ray cluster (``-m "not ray"`` skips them locally)."""
    import pytest

    for item in items:
        path = str(item.path).replace("\\", "/")
        if path.endswith(RAY_MODULES) or "over_ray" in item.name or "ray_local" in item.name:
            item.add_marker(pytest.mark.ray)


@pytest.fixture
def tool_heavy_capacity() -> None:
    """The measured capacity of tool-heavy on hetero-16 (docs/cache.md: 1.774 wf/s), stored
    in the tests' own capacity cache so that no test spends a minute measuring it."""
    from scalesched.cluster import get_cluster
    from scalesched.runs.capacity import CapacityResult, cache_key, store_result

    store_result(
        cache_key(get_cluster("hetero-16"), "tool-heavy"),
        CapacityResult("hetero-16", "tool-heavy", 1.774, "least_loaded", {}, {}, 1.774, 0, 0),
    )
