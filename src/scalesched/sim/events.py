"""The simulator's event kinds: the heap holds ``(time, seq, kind, a, b)``, and each kind
indexes the simulation's table of handlers (``Simulation._handlers``), in this order."""

ARRIVE, LAND, CPU_DONE, TASK_DONE, PREFILL_DONE, DECODE, LOAD_DONE = range(7)
RELEASE = 7
"""An idle replica's release timer (``LoadReplica``); after the seven kinds above."""
DRAINED = 8
"""A group a ``Redeploy`` removes may be empty now (``sim.redeploy``)."""
GROWN = 9
"""A group a ``Redeploy`` enlarges has loaded its new replicas (``sim.redeploy``)."""
