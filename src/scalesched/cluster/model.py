"""The cluster as the rest of the package sees it: plain frozen records, no execution.

Loading (YAML, presets) and the LLM cost model live beside this module; the simulator
consumes only these two types plus ``scalesched.cluster.perf``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server of the cluster."""

    name: str
    """Unique instance name, e.g. ``h100-80g-x4-0``."""
    type: str
    """Server type name from the catalog (or a custom name from a cluster file)."""
    gpu_type: str | None
    """Key of ``perf.GPU_TYPES``; None for a CPU-only server."""
    gpus: int
    cpu_cores: int
    core_speed: float
    """Relative speed of one core; tool work of w core-seconds takes w / core_speed."""
    nic_gbps: float
    """Network interface bandwidth, gigabits per second."""
    load_gbs: float
    """Bandwidth for loading model weights into GPU memory, gigabytes per second."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: str
    servers: tuple[ServerSpec, ...]
    network_latency_s: float = 50e-6

    def __len__(self) -> int:
        return len(self.servers)
