"""Type stubs of the compiled simulation core (``sim/_core/module.cpp``; built optionally,
see ``scalesched.sim.core``)."""

from collections.abc import Callable, Sequence

import numpy as np

from scalesched.decision.features import TaskRequest

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

class TaskCosts:
    """The per-workflow estimates of one ``ClusterTables`` and ``AnyDeployment`` (bounds,
    HEFT's mean costs), bound once; ``prefilled`` -1 stands for None."""

    def __init__(
        self,
        prefills: Sequence[tuple[object, bool, Sequence[float], int, float, float]],
        classes: Sequence[Sequence[tuple[int, int, float, float]]],
        configs: Sequence[Sequence[tuple[int, float, float]]],
        model_index: dict[str, int],
        max_core_speed: float,
        mean_core_speed: float,
        any_max_core_speed: float,
    ) -> None: ...
    def fastest_llm(self, model: int, prompt: int, output: int, prefilled: int) -> float: ...
    def mean_llm(self, model: int, prompt: int, output: int) -> float: ...
    def any_llm(self, model: int, prompt: int, output: int, prefilled: int) -> float: ...
    def bounds(self, workflow: object) -> tuple[float, float]: ...
    def mean_costs(self, workflow: object) -> list[float]: ...

class RequestBuilder:
    """Builds ``RunTasks.request``'s ``TaskRequest`` (fields checked against the class)."""

    def __init__(
        self,
        request_type: type,
        fields: list[str],
        defaults: dict[str, object],
        model_index: dict[str, int],
    ) -> None: ...
    def request(
        self,
        tasks: object,
        gid: int,
        servers: object,
        now: float,
        attained: np.ndarray,
        rank: float | None = None,
    ) -> TaskRequest: ...

class EventRun:
    """A whole run in C++ over one ``Simulation``'s tables, books and jobs
    (``sim.compiled_run``; ``sim/_core/event_core.hpp``)."""

    def __init__(
        self,
        decision_core: DecisionCore,
        task_costs: TaskCosts,
        classes: Sequence[tuple[tuple[object, bool, Sequence[float], int, float, float], int, int]],
        decode_lin: np.ndarray,
        decode_attn: np.ndarray,
        model_classes: Sequence[Sequence[int]],
        n_models: int,
        tp: Sequence[float],
        engine_class: Sequence[int],
        load_s: Sequence[float],
        resident: Sequence[tuple[int, int, float]],
        cores: Sequence[int],
        speed: Sequence[float],
        gpus_total: float,
        books: Sequence[np.ndarray],
        engine_state: np.ndarray,
        engine_books: Sequence[np.ndarray],
        job_books: Sequence[np.ndarray],
        free_list: Sequence[float],
        arrivals: Sequence[float],
        window_first: int,
        window_last: int,
        streamed: bool,
        record_trace: bool,
        job_at: Callable[[int], object],
        on_done: Callable[[int], None] | None,
        on_trace: Callable[..., None],
        held_sum: Callable[[list[float]], float],
        model_index: dict[str, int],
    ) -> None: ...
    def run(self, policy: int, tokens_of: Callable[[object], list[int]] | None) -> None: ...
    def counters(self) -> dict[str, float | int]: ...
    def server_books(
        self,
    ) -> tuple[
        list[int], list[float], list[float], list[float], list[float], list[float], list[float]
    ]: ...
    def window_marks(self) -> tuple[list[tuple[list[float], list[float]]], list[float]]: ...
    def held_log(self) -> list[tuple[float, float]]: ...
    def job_end(self) -> list[float]: ...
    def job_left(self) -> list[int]: ...
    def job_end_into(self, out: np.ndarray) -> None: ...
    def n_queue_delays(self) -> int: ...
    def queue_delays_into(self, out: np.ndarray) -> None: ...
    def per_id(self, field: int) -> list[float]: ...
    def per_id_int(self, field: int) -> list[int]: ...
    def per_id_done(self) -> list[bool]: ...
    def adopt(
        self,
        sim: object,
        seq: int,
        policy: int,
        tokens_of: Callable[[object], list[int]] | None,
        truths_of: Callable[[int], object] | None,
    ) -> None: ...
    def run_until(
        self, policy: int, tokens_of: Callable[[object], list[int]] | None, end: float
    ) -> list[tuple[int, int]]: ...
    def next_ready(self, end: float) -> int: ...
    def next_instant(self, end: float) -> list[int]: ...
    def apply(self, gid: int, server: int, est: float, priority: float) -> None: ...
    def defer(self, gid: int) -> None: ...
    def may_defer(self, gid: int) -> bool: ...
    def load_replica(self, server: int, model: int, idle_s: float) -> None: ...
    def replica_books(
        self,
    ) -> tuple[int, int, int, int, float, list[tuple[float, float]], int]: ...
    def n_servers(self) -> int: ...
    def use_soft_eft(
        self,
        sharpness: float,
        log1p: Callable[..., object],
        exp: Callable[..., object],
        rel: np.ndarray,
        weights: np.ndarray,
    ) -> None: ...
    def on_finished(self, callback: Callable[[int, int, bool], None] | None) -> None: ...
    def heft_ranks(
        self, latency_s: float, mean_nic_bytes_per_s: float, ready_order: bool
    ) -> None: ...
    def rank_of(self, gid: int) -> float: ...
    def clock(self) -> tuple[float, float, int, int]: ...
    def fork(self) -> EventRun: ...
    def trial(
        self, gid: int, server: int, est: float, priority: float, end: float
    ) -> tuple[float, float, int, list[float]]: ...

def numpy_sum(values: np.ndarray) -> float: ...
def soft_eft_cdf(
    sharpness: float, finish: Sequence[float], mask: Sequence[bool]
) -> tuple[list[int], list[float]]: ...
