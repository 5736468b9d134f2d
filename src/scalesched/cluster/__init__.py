"""Clusters: server catalog, cluster files and presets, and the LLM cost model."""

from scalesched.cluster.catalog import SERVER_TYPES, ServerType, can_host, list_server_types
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.perf import (
    GPU_TYPES,
    MODELS,
    EnginePerf,
    GpuType,
    LlmModel,
    engine_perf,
    tensor_parallel_degree,
)
from scalesched.cluster.spec import (
    cluster_file_schema,
    cluster_from_dict,
    cluster_to_dict,
    cluster_to_yaml,
    get_cluster,
    list_cluster_presets,
    load_cluster_file,
)

__all__ = [
    "GPU_TYPES",
    "MODELS",
    "SERVER_TYPES",
    "ClusterSpec",
    "EnginePerf",
    "GpuType",
    "LlmModel",
    "ServerSpec",
    "ServerType",
    "can_host",
    "cluster_file_schema",
    "cluster_from_dict",
    "cluster_to_dict",
    "cluster_to_yaml",
    "engine_perf",
    "get_cluster",
    "list_cluster_presets",
    "list_server_types",
    "load_cluster_file",
    "tensor_parallel_degree",
]
