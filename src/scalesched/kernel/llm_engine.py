"""The LLM serving engine's arithmetic, kept once for the simulator and the runtime's
emulated backend: what a request reserves in KV memory, when a batch admits it, how long a
decode step takes for the batch it is in, and which idle engines a load evicts.

Each executor keeps its own clock around these numbers: the simulator re-times the batch at
every event with a fluid token clock (``sim/engine.py``); the runtime times a request once,
with the batch as it stands at admission (``runtime/agent.py``, the gap is in
docs/runtime.md). Prefill times come from the engine's perf entry (``perf.prefill_s``).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

from scalesched.cluster.tables import ClusterTables


class EngineBatch:
    """The continuous batch of one engine (one model on ``tp`` GPUs of one server).

    A request reserves ``prompt + output`` KV tokens and a batch slot from admission to its
    end (``admit`` / ``release``); while it decodes it adds its mean context,
    ``prompt + output // 2``, to the batch (``start_decoding`` / ``stop_decoding``). A
    decode step of ``b`` requests with ``c`` context tokens in all takes
    ``decode_lin[b] + decode_attn * c`` (the cluster tables' linearisation of the perf
    model); batches past the table's end cost as its last entry."""

    __slots__ = (
        "klass",
        "perf",
        "max_batch",
        "kv_cap",
        "n_active",
        "kv_used",
        "n_decoding",
        "ctx_sum",
        "_lin",
        "_attn",
        "_top",
    )

    SHARED = frozenset({"perf", "_lin"})
    """Slots that hold the cluster's static tables: a copy of a running engine (a fork of
    its simulation) shares them instead of copying thousands of floats."""

    def __deepcopy__(self, memo: dict[int, Any]) -> EngineBatch:
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for cls in type(self).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if not hasattr(self, name):
                    continue
                value = getattr(self, name)
                setattr(clone, name, value if name in self.SHARED else copy.deepcopy(value, memo))
        return clone

    def __init__(self, tables: ClusterTables, klass: int) -> None:
        perf = tables.engines[klass]
        self.klass, self.perf = klass, perf
        self.max_batch: int = perf.max_batch
        self.kv_cap: int = perf.kv_capacity_tokens
        self.n_active = 0
        """Requests admitted (prefilling or decoding)."""
        self.kv_used = 0
        self.n_decoding = 0
        self.ctx_sum = 0
        """Sum of the mean contexts of the decoding requests."""
        self.reload_step_tables(tables)

    def reload_step_tables(self, tables: ClusterTables) -> None:
        """Re-read the decode-step tables (after a caller changed them mid-run, e.g. an
        injected slowdown); they are copied here because the hot path indexes them."""
        # Python floats, not numpy scalars: the same doubles, indexed several times faster.
        self._lin: list[float] = tables.decode_lin[self.klass].tolist()
        self._attn = float(tables.decode_attn[self.klass])
        self._top = len(self._lin) - 1

    def fits(self, prompt: int, output: int) -> bool:
        """Whether the batch admits this request now: a free slot under the cap and room
        in KV memory. An empty batch takes any request, so one larger than the whole
        memory still runs (alone) rather than blocking its engine forever."""
        n = self.n_active
        return n < self.max_batch and (n == 0 or self.kv_used + prompt + output <= self.kv_cap)

    def admit(self, prompt: int, output: int) -> None:
        """The request takes a slot and reserves its KV tokens for its whole life."""
        self.n_active += 1
        self.kv_used += prompt + output

    def release(self, prompt: int, output: int) -> None:
        """The request ends (or is cancelled): its slot and KV tokens are free again."""
        self.n_active -= 1
        self.kv_used -= prompt + output

    def start_decoding(self, prompt: int, output: int) -> int:
        """The request joins the decoding batch; returns its decode steps (one token a
        step, at least one)."""
        self.n_decoding += 1
        self.ctx_sum += prompt + output // 2
        return output if output > 1 else 1  # max(1, output) without the builtin's call

    def stop_decoding(self, prompt: int, output: int) -> None:
        self.n_decoding -= 1
        self.ctx_sum -= prompt + output // 2

    def step_s(self) -> float:
        """Seconds of one decode step of the batch as it is now."""
        n = self.n_decoding
        return self._lin[n if n < self._top else self._top] + self._attn * self.ctx_sum


class Evictable(Protocol):
    """An engine as eviction sees it: the GPUs it holds and when it last served."""

    @property
    def tp(self) -> float: ...

    @property
    def last_used(self) -> float: ...


E = TypeVar("E", bound=Evictable)
K = TypeVar("K")


def lru_evictions(free: float, need: float, idle: Iterable[E]) -> Sequence[E] | None:
    """The idle engines to evict, least recently used first, until ``need`` GPUs are free
    (none when ``free`` already covers it); None when evicting every idle engine would
    still not make room, so that a load never throws away what it cannot replace."""
    order = sorted(idle, key=lambda e: e.last_used)
    if free + sum(e.tp for e in order) < need:
        return None
    victims = []
    for e in order:
        if free >= need:
            break
        victims.append(e)
        free += e.tp
    return victims


def queue_by_priority(waiting: deque[K], item: K, priority: float, priority_of: Any) -> None:
    """Put ``item`` ahead of every waiting request with a larger priority value
    (``priority_of[other]``), behind those with the same or a smaller one, so equal
    priorities keep arrival order (``Place.priority``). Linear in the queue: engine queues
    are tens of requests, and runs without priorities never come here."""
    for k, other in enumerate(waiting):
        if priority_of[other] > priority:
            waiting.insert(k, item)
            return
    waiting.append(item)
