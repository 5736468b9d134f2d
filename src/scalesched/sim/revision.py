"""Which simulator a measured figure came from.

A capacity in the user's cache (``scalesched.runs.capacity``) is a measurement of this
simulator and of the policies it ran: when a change moves a run's figures, a figure
measured before must not keep defining ``--load``. Every such change re-records the
golden runs (``tests/sim/test_engine_golden.py``), so the revision is the digest of
their file, and a test holds it there: re-recording a golden without updating this
constant fails the tests, and updating it retires every cached figure measured before.
"""

from __future__ import annotations

SIMULATOR_REVISION = "d4b074a5a691"
"""The first 12 hex digits of the SHA-256 of ``tests/sim/data/engine_golden.json``."""
