"""How much could any scheduler still win on one setting? Each policy's mean response
against the lower bounds (contention-free on this deployment and on any deployment, and
capacity-aware: an LP over what the fast servers can absorb at the offered rate, in its
Lagrangian form on long windows, for this deployment and over every allocation of the
cluster's GPUs), the oracles' gain over the best heuristic, each policy's
gap split exactly along its workflows' realised critical paths, and into deployment,
placement and ordering (docs/headroom.md, docs/headroom-split.md)."""

from scalesched.eval.headroom.allocation import allocation_bound
from scalesched.eval.headroom.bound import CapacityBound, capacity_bound
from scalesched.eval.headroom.decompose import COMPONENTS, Decomposition, decompose
from scalesched.eval.headroom.lagrange import lagrangian_capacity_bound
from scalesched.eval.headroom.split import Split
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
    "Split",
    "allocation_bound",
    "capacity_bound",
    "decompose",
    "lagrangian_capacity_bound",
    "measure_headroom",
]
