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
    def llm_view(
        self,
        view: object,
        task: object,
        prefill: np.ndarray,
        out: np.ndarray,
        transfer: np.ndarray | None,
    ) -> None: ...
    def tool_view(
        self, view: object, task: object, out: np.ndarray, transfer: np.ndarray | None
    ) -> None: ...
