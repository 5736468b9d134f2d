"""Re-sampled branches sharing logits (``--logits-cache``), a part of the simulation: a
branch admitted takes what its group's logits cache holds, rides a sibling's decode while
it can (off the batch, a mark of its own on the token clock), and stores its rows when it
ends. ``sim/logits_cache.py`` has the cache model; this is how the simulator runs it."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from scalesched.decision.features import ENGINE_READY
from scalesched.sim.gpu_engine import SimEngine as _Engine
from scalesched.sim.logits_cache import LogitsCache, logits_row_tokens
from scalesched.workload.instance import TaskInstance

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


class BranchRides:
    """The logits cache of a run and the rides of its branches."""

    def __init__(self, sim: Simulation, store: bool) -> None:
        self.sim = sim
        self.cache = LogitsCache(store)
        """True: branches reuse their group's logits; False: measured only."""
        self.ride_steps: dict[int, int] = {}
        """Decode steps each branch riding a sibling runs itself once the ride ends."""

    def group(self, gid: int, task: TaskInstance) -> tuple[tuple[int, int], int, int]:
        """(group key (job, first path's index), group size, the branch's own index)."""
        sim = self.sim
        ji = sim.tasks.job_of[gid]
        first = task.resample_of
        assert first is not None
        tasks = sim.jobs[ji].workflow.tasks
        size = sum(1 for t in tasks if t.resample_of == first)
        return (ji, first), size, sim.origin[gid] - sim.tasks.offset[ji]

    def admit(self, eng: _Engine, gid: int, task: TaskInstance) -> int:
        """Branch ``gid`` is admitted: the tokens it takes from the logits cache now."""
        sim = self.sim
        key, size, index = self.group(gid, task)
        vclock = eng.vclock  # read as of now, not advanced: the clock's rounding stays as is
        if eng.n_decoding:
            vclock += (sim.now - eng.last_update) / eng.step
        return self.cache.admit(
            gid, key, size, index, task.output_tokens, task.replay_tokens, eng, vclock, sim.now
        )

    def start_own_decode(self, eng: _Engine, gid: int) -> None:
        """A riding branch joins the decode batch for the tokens after its ride."""
        sim = self.sim
        task = sim._task(gid)
        eng.start_decoding(task.prompt_tokens, task.output_tokens)
        heapq.heappush(eng.marks, (eng.vclock + self.ride_steps.pop(gid), gid))

    def wake_riders(self, eng: _Engine) -> None:
        """Every riding branch of ``eng`` decodes on its own from now (the sibling it rode
        was cancelled: nothing would move its ride on)."""
        sim = self.sim
        riders = [-g - 1 for _, g in eng.marks if g < 0]
        eng.marks = [m for m in eng.marks if m[1] >= 0]
        heapq.heapify(eng.marks)
        for gid in riders:
            self.start_own_decode(eng, gid)
        sim._llm.reschedule(eng)

    def finished(self, eng: _Engine, gid: int, task: TaskInstance) -> None:
        """Branch ``gid`` finished: its first-path rows are stored (charged to KV memory)
        and a group's rows freed with its last branch."""
        sim = self.sim
        now = sim.now

        def make_room(tokens: int) -> bool:  # free memory, or evictable prefix segments
            free = eng.kv_cap - eng.kv_used
            if tokens <= free:
                return True
            if eng.kv is None or tokens > free + eng.kv.evictable:
                return False
            eng.kv_used -= eng.kv.evict(tokens - free, now)
            return True

        changes = self.cache.finished(gid, eng, logits_row_tokens(task.model or ""), make_room, now)
        for other, tokens in changes:
            assert isinstance(other, _Engine)
            other.kv_used += tokens
            live = sim._engines[other.server].get(other.model) is other
            if tokens < 0 and other is not eng and live and other.state == ENGINE_READY:
                sim._llm.admit(other)  # memory freed there: its queue may move
                sim._llm.refresh_busy(other)
                sim._llm.set_idle(other)
