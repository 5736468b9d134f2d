"""One model served by continuous batching on a simulated server: the shared batch model
(``kernel.llm_engine``) plus the simulator's queue, loading state and fluid token clock."""

from __future__ import annotations

import math
from collections import deque

from scalesched.cache.kv import PrefixCache
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import ENGINE_LOADING
from scalesched.kernel.llm_engine import EngineBatch


class SimEngine(EngineBatch):
    """One model served on ``tp`` GPUs of a server by continuous batching: the shared batch
    model (``kernel.llm_engine``) plus the simulator's queue, loading state and fluid
    token clock."""

    __slots__ = (
        "server",
        "model",
        "tp",
        "state",
        "waiting",
        "marks",
        "vclock",
        "last_update",
        "step",
        "version",
        "due",
        "due_seq",
        "due_version",
        "pending",
        "pending_at",
        "last_used",
        "busy",
        "idle",
        "kv",
        "replica_at",
        "idle_s",
        "idle_mark",
        "draining",
        "grow_to",
        "grow_extra",
        "grow_mark",
    )

    def __init__(self, server: int, model: int, tp: float, klass: int, tables: ClusterTables):
        super().__init__(tables, klass)
        self.server, self.model, self.tp = server, model, tp
        self.state = ENGINE_LOADING
        self.waiting: deque[int] = deque()
        self.marks: list[tuple[float, int]] = []
        self.vclock = 0.0
        self.last_update = 0.0
        self.step = 0.0
        self.version = -1
        """Changes at every reschedule (from the run's sequence counter, so unique)."""
        self.due = math.inf
        self.due_seq = -1
        self.due_version = -1
        """When the head request finishes, at the batch as of the reschedule of version
        ``due_version``; ``due_seq`` orders it among events of the same instant."""
        self.pending = -2
        self.pending_at = math.inf
        """The version and time of the engine's one live decode event (-2: none): it fires
        at or before ``due`` (lazy rescheduling, ``LlmServing.decode_live``)."""
        self.last_used = 0.0
        self.busy = False
        self.idle = False
        self.kv: PrefixCache | None = None
        """The engine's prefix cache (``--kv-policy``); None: no KV kept between calls."""
        self.replica_at = -1.0
        """When a ``LoadReplica`` started loading it (-1: an engine loaded on demand)."""
        self.idle_s = math.inf
        self.idle_mark = -1
        """A replica: unloaded once idle for ``idle_s``; the timer armed at its latest idle
        start carries ``idle_mark`` (``Replicas.on_release``)."""
        self.draining = False
        """A group a ``Redeploy`` removed: unloaded once it holds no call (``sim.redeploy``)."""
        self.grow_to = -1
        self.grow_extra = 0.0
        self.grow_mark = 0
        """A group a ``Redeploy`` enlarges: the class it grows to (-1: none) once its new
        replicas load on the ``grow_extra`` GPUs held meanwhile; the GROWN event carries
        ``grow_mark``."""

    @property
    def n_requests(self) -> int:
        return self.n_active + len(self.waiting)
