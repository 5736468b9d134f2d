"""How much could any scheduler still win on one setting? Each policy's mean response
against two lower bounds (contention-free, and capacity-aware: an LP over what the fast
servers can absorb at the offered rate), the oracles' gain over the best heuristic, and
each policy's gap split exactly along its workflows' realised critical paths
(docs/headroom.md)."""

from scalesched.eval.headroom.bound import CapacityBound, capacity_bound
from scalesched.eval.headroom.decompose import COMPONENTS, Decomposition, decompose
from scalesched.eval.headroom.study import (
    DEFAULT_ORACLES,
    NO_CACHES,
    Caches,
    Headroom,
    measure_headroom,
)

__all__ = [
    "COMPONENTS",
    "DEFAULT_ORACLES",
    "NO_CACHES",
    "Caches",
    "CapacityBound",
    "Decomposition",
    "Headroom",
    "capacity_bound",
    "decompose",
    "measure_headroom",
]
