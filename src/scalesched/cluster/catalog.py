"""Catalog of server types: one GPU type x 1/2/4/8 GPUs, plus two CPU-only servers.

GPU servers: 32 CPU cores of speed 1.0, a 100 Gb/s NIC, and weights loaded at 8 GB/s (NVMe
or the page cache into HBM over PCIe, what an inference server sees in practice).  CPU
servers: 25 Gb/s NIC, no GPUs, nothing to load.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalesched.cluster.model import ServerSpec
from scalesched.cluster.perf import GPU_TYPES, tensor_parallel_degree

GPU_SERVER_CORES = 32
GPU_SERVER_NIC_GBPS = 100.0
GPU_SERVER_LOAD_GBS = 8.0
CPU_SERVER_NIC_GBPS = 25.0
GPU_COUNTS = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class ServerType:
    """A catalog entry: everything of a ``ServerSpec`` but the instance name."""

    name: str
    gpu_type: str | None
    gpus: int
    cpu_cores: int
    core_speed: float
    nic_gbps: float
    load_gbs: float
    description: str

    def instance(self, index: int) -> ServerSpec:
        """The server ``<type>-<index>``."""
        return ServerSpec(
            name=f"{self.name}-{index}",
            type=self.name,
            gpu_type=self.gpu_type,
            gpus=self.gpus,
            cpu_cores=self.cpu_cores,
            core_speed=self.core_speed,
            nic_gbps=self.nic_gbps,
            load_gbs=self.load_gbs,
        )


def _build() -> dict[str, ServerType]:
    out: dict[str, ServerType] = {}
    for gname, g in GPU_TYPES.items():
        for n in GPU_COUNTS:
            key = f"{gname.lower()}-x{n}"
            how = "measured profiles" if g.measured else "roofline-scaled from A40"
            out[key] = ServerType(
                name=key,
                gpu_type=gname,
                gpus=n,
                cpu_cores=GPU_SERVER_CORES,
                core_speed=1.0,
                nic_gbps=GPU_SERVER_NIC_GBPS,
                load_gbs=GPU_SERVER_LOAD_GBS,
                description=(
                    f"{n} x {gname} ({n * g.memory_gb:.0f} GB, {g.mem_bw_gbs:.0f} GB/s and "
                    f"{g.tflops:.0f} TFLOPS each; {how}), {GPU_SERVER_CORES} cores, "
                    f"{GPU_SERVER_NIC_GBPS:.0f} Gb/s"
                ),
            )
    for cores in (32, 64):
        key = f"cpu-{cores}c"
        out[key] = ServerType(
            name=key,
            gpu_type=None,
            gpus=0,
            cpu_cores=cores,
            core_speed=1.0,
            nic_gbps=CPU_SERVER_NIC_GBPS,
            load_gbs=0.0,
            description=f"CPU only, {cores} cores, {CPU_SERVER_NIC_GBPS:.0f} Gb/s",
        )
    return out


SERVER_TYPES: dict[str, ServerType] = _build()


def list_server_types() -> list[tuple[str, str]]:
    """(catalog key, one-line description) for every server type, catalog order."""
    return [(t.name, t.description) for t in SERVER_TYPES.values()]


def can_host(server: ServerSpec, model: str) -> bool:
    """True if the server has GPUs on which ``model`` fits at some tensor-parallel degree."""
    if server.gpu_type is None or server.gpus <= 0:
        return False
    return tensor_parallel_degree(model, server.gpu_type, server.gpus) is not None
