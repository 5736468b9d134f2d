"""Type stubs of the compiled simulation core (``sim/_core/module.cpp``; built optionally,
see ``scalesched.sim.core``)."""

from collections.abc import Sequence

import numpy as np

class DecisionCore:
    """The static tables of one ``ClusterTables``, bound once (arrays read in place)."""

    def __init__(
        self,
        n: int,
        decode_attn: np.ndarray,
        lin_flat: np.ndarray,
        inc_flat: np.ndarray,
        kv_capacity: np.ndarray,
        max_batch: np.ndarray,
        nic: np.ndarray,
        latency_s: float,
        cores: np.ndarray,
        core_speed: np.ndarray,
        masks: Sequence[np.ndarray],
        all_feasible: Sequence[bool],
        kk: Sequence[np.ndarray],
        base: Sequence[np.ndarray],
        load: Sequence[np.ndarray],
        tp: Sequence[np.ndarray],
    ) -> None: ...
    def llm(
        self,
        m: int,
        prompt: int,
        out_est: int,
        now: float,
        prefill: np.ndarray,
        engine_state: np.ndarray,
        engine_batch: np.ndarray,
        engine_ctx: np.ndarray,
        engine_ready_at: np.ndarray,
        free_gpus: np.ndarray,
        idle_gpus: np.ndarray,
        est_work: np.ndarray,
        n_assigned: np.ndarray,
        parent_servers: Sequence[int],
        parent_bytes: Sequence[float],
        out: np.ndarray,
        transfer: np.ndarray | None,
    ) -> None: ...
    def tool(
        self,
        cpu_work: float,
        ext_latency_est: float,
        tools_in_flight: np.ndarray,
        cpu_backlog: np.ndarray,
        parent_servers: Sequence[int],
        parent_bytes: Sequence[float],
        out: np.ndarray,
        transfer: np.ndarray | None,
    ) -> None: ...
    def transfer(
        self, parent_servers: Sequence[int], parent_bytes: Sequence[float], out: np.ndarray
    ) -> None: ...
