"""LLM serving, a part of the simulation: the hot decode path of every continuous-batching
engine. A request that lands joins its model's engine (created, and its GPUs requested from
``_residency``, when the model is not resident); it is admitted while the batch cap and the
KV memory allow, prefills, then decodes on the engine's fluid token clock: between events
the batch is constant, so a virtual clock advances by ``dt / step`` and each request ends
when the clock passes its mark. One live decode event per engine times the head mark, re-timed
lazily when the batch changes (``reschedule``, ``decode_live``)."""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from scalesched.cache.kv import PrefixCache
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES
from scalesched.decision.features import ENGINE_LOADING, ENGINE_READY
from scalesched.kernel.llm_engine import queue_by_priority
from scalesched.sim.events import DECODE as _DECODE
from scalesched.sim.events import PREFILL_DONE as _PREFILL_DONE
from scalesched.sim.gpu_engine import SimEngine as _Engine
from scalesched.workload.instance import TaskInstance

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation

_TOKEN_EPS = 1e-6
_FIFO = math.inf
"""The priority of a request no ``Place`` ordered: it joins the end of the queue."""


class LlmServing:
    """Admission, prefill, decode and the busy/idle books of the simulation's engines."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def arrive(self, gid: int, s: int, task: TaskInstance) -> None:
        """LLM call ``gid`` landed on server ``s``: it queues at its model's engine."""
        sim = self.sim
        m = MODEL_INDEX[task.model or ""]
        engines = sim._engines[s]
        eng = engines.get(m)
        if eng is None:
            t = sim.tables
            eng = _Engine(s, m, int(t.tp[s, m]), int(t.engine_class[s, m]), t)
            if sim._kv is not None:
                eng.kv = PrefixCache(sim._kv.eviction)
            engines[m] = eng
            sim.engine_state[s, m] = ENGINE_LOADING
            sim._residency.request_gpus(eng)
        priority = sim.priority[gid]
        if priority == _FIFO:
            eng.waiting.append(gid)
        else:
            queue_by_priority(eng.waiting, gid, priority, sim.priority)
        if eng.replica_at >= 0:
            sim._replicas.calls += 1
        eng.last_used = sim.now
        self.set_idle(eng)
        if eng.state == ENGINE_READY:
            self.admit(eng)

    def admit(self, eng: _Engine) -> None:
        """Admit the head of the engine's queue while it fits (the head waits for a slot or
        memory; the queue is in arrival order unless a ``Place`` gave priorities); each
        admitted request prefills."""
        sim = self.sim
        if eng.kv is not None:
            assert sim._kv is not None  # engines keep KV only in a --kv-policy run
            sim._kv.admit(eng, eng.kv)
            return
        tasks_of = sim._task
        waiting = eng.waiting
        while waiting:
            task = tasks_of(waiting[0])
            if not eng.fits(task.prompt_tokens, task.output_tokens):
                break
            gid = waiting.popleft()
            eng.admit(task.prompt_tokens, task.output_tokens)
            sim.started_at[gid] = sim.now
            prefill = task.prompt_tokens
            if task.resample_of is not None and sim._rides is not None:
                prefill += sim._rides.admit(eng, gid, task)
            sim._push(sim.now + eng.perf.prefill_s(prefill), _PREFILL_DONE, gid, 0)
        self.refresh_busy(eng)

    def on_prefill_done(self, gid: int, _: int) -> None:
        sim = self.sim
        if sim._cancelled[gid]:
            return
        task = sim._task(gid)
        s = sim.server[gid]
        eng = sim._engines[s][MODEL_INDEX[task.model or ""]]
        if eng.kv is not None:
            assert sim._kv is not None  # engines keep KV only in a --kv-policy run
            sim._kv.prefilled(eng.kv, gid, task)
        self.advance(eng)
        if task.resample_of is not None and sim._rides is not None:
            steps, ride_end = sim._rides.cache.start_decoding(gid, eng, eng.vclock)
            if ride_end is not None:  # it rides a sibling: out of the batch until ride_end
                sim._rides.ride_steps[gid] = steps
                heapq.heappush(eng.marks, (ride_end, -gid - 1))
                self.reschedule(eng)
                return
            eng.start_decoding(task.prompt_tokens, task.output_tokens)
        else:
            steps = eng.start_decoding(task.prompt_tokens, task.output_tokens)
        heapq.heappush(eng.marks, (eng.vclock + steps, gid))
        self.reschedule(eng)

    def advance(self, eng: _Engine) -> None:
        """Bring the engine's token clock up to now."""
        now = self.sim.now
        if eng.n_decoding:
            eng.vclock += (now - eng.last_update) / eng.step
        eng.last_update = now

    def reschedule(self, eng: _Engine) -> None:
        """The batch changed: time the head request's finish. Lazily: the engine keeps one
        live decode event, and a new one is pushed only when the finish moved earlier than
        it; otherwise the live event, when it fires, re-times itself to the finish
        (``decode_live``). The finish keeps the time and sequence number a fresh event
        would have had, so every real event is processed in the same order as pushing one
        per reschedule (which left about half of all decode events superseded)."""
        sim = self.sim
        version = eng.version = next(sim._seq)  # globally unique: stale events never match
        if not eng.n_decoding:
            if eng.marks:  # branches riding a sibling that stopped: they decode on their own
                assert sim._rides is not None  # riders exist only with --logits-cache
                sim._rides.wake_riders(eng)  # (and reschedule)
            return
        eng.step = eng.step_s()
        left = max(0.0, eng.marks[0][0] - eng.vclock)
        due = sim.now + left * eng.step
        seq = next(sim._seq)
        eng.due, eng.due_seq, eng.due_version = due, seq, version
        if eng.pending < 0 or due < eng.pending_at:
            key = eng.server * len(MODEL_NAMES) + eng.model
            heapq.heappush(sim._heap, (due, seq, _DECODE, key, version))
            eng.pending, eng.pending_at = version, due
        else:
            sim.decode_retimes += 1  # the live event will fire early and re-time itself

    def decode_live(self, key: int, version: int) -> bool:
        """Whether a popped decode event is due (then ``on_decode`` runs). A superseded
        one is dropped; the engine's live event firing before its due time (the batch
        changed since it was pushed) is pushed again for the due time, as it was timed."""
        sim = self.sim
        eng = sim._engines[key // len(MODEL_NAMES)].get(key % len(MODEL_NAMES))
        if eng is not None and version == eng.version:
            return True
        sim.decode_skipped += 1
        if eng is None or version != eng.pending:
            return False  # unloaded, or superseded by an earlier finish pushed since
        if eng.due_version == eng.version:
            heapq.heappush(sim._heap, (eng.due, eng.due_seq, _DECODE, key, eng.version))
            eng.pending, eng.pending_at = eng.version, eng.due
        else:
            eng.pending = -2  # the batch stopped decoding: nothing to time
        return False

    def on_decode(self, key: int, version: int) -> None:
        sim = self.sim
        s, m = divmod(key, len(MODEL_NAMES))
        eng = sim._engines[s][m]
        eng.pending = -2  # this event was the live one
        self.advance(eng)
        marks = eng.marks
        if marks:
            # This event was timed for the head mark; at a large clock, rounding of
            # ``now + left * step`` can leave vclock short of it, and rescheduling would
            # land at the same instant forever. The head mark is due: finish it.
            eng.vclock = max(eng.vclock, marks[0][0])
        finished = []
        while marks and marks[0][0] <= eng.vclock + _TOKEN_EPS:
            _, gid = heapq.heappop(marks)
            if gid < 0:  # a branch's ride ends: it decodes its own tokens from here
                assert sim._rides is not None  # riders exist only with --logits-cache
                sim._rides.start_own_decode(eng, -gid - 1)
            else:
                finished.append(gid)
        for gid in finished:
            task = sim._task(gid)
            eng.stop_decoding(task.prompt_tokens, task.output_tokens)
            if eng.kv is None:
                eng.release(task.prompt_tokens, task.output_tokens)
            else:
                assert sim._kv is not None  # engines keep KV only in a --kv-policy run
                sim._kv.finished(eng, eng.kv, gid, task)
            if task.resample_of is not None and sim._rides is not None:
                sim._rides.finished(eng, gid, task)
            eng.last_used = sim.now
            sim.engine_batch[s, m] -= 1
            sim.engine_ctx[s, m] -= task.prompt_tokens + task.output_tokens_est // 2
        self.admit(eng)
        self.reschedule(eng)
        self.refresh_busy(eng)
        self.set_idle(eng)
        for gid in finished:
            sim._finish(gid)
        if eng.idle and sim._gpu_wait[s]:
            sim._residency.serve_gpu_wait(s)

    def refresh_busy(self, eng: _Engine) -> None:
        """Book the engine's GPUs busy (loading, or any request admitted) or not."""
        busy = eng.state == ENGINE_LOADING or eng.n_active > 0
        if busy == eng.busy:
            return
        sim = self.sim
        s = eng.server
        sim._gpu_area[s] += sim._busy_gpus[s] * (sim.now - sim._gpu_mark[s])
        sim._gpu_mark[s] = sim.now
        sim._busy_gpus[s] += eng.tp if busy else -eng.tp
        eng.busy = busy

    def set_idle(self, eng: _Engine) -> None:
        """Book the engine's GPUs idle (ready, no request: evictable) or not; a replica
        falling idle arms its release."""
        idle = eng.state == ENGINE_READY and eng.n_requests == 0
        if idle != eng.idle:
            sim = self.sim
            eng.idle = idle
            sim.idle_gpus[eng.server] += eng.tp if idle else -eng.tp
            if idle and eng.replica_at >= 0:
                sim._replicas.arm_release(eng)
            elif idle and eng.draining:
                sim._redeploy.schedule_drain(eng)

    def cancel(self, y: int, s: int, task: TaskInstance, landed: bool, started: bool) -> None:
        """Stop LLM copy ``y`` on server ``s`` (in transfer, queued, prefilling, riding or
        decoding) and give back what it holds."""
        sim = self.sim
        m = MODEL_INDEX[task.model or ""]
        sim.engine_batch[s, m] -= 1
        sim.engine_ctx[s, m] -= task.prompt_tokens + task.output_tokens_est // 2
        if not landed:
            return
        eng = sim._engines[s][m]
        if not started:
            eng.waiting.remove(y)
        else:
            sim.extra_server_seconds += sim.now - sim.started_at[y]
            self._stop_running(eng, y, task)
        eng.last_used = sim.now
        self.admit(eng)
        self.refresh_busy(eng)
        self.set_idle(eng)
        if eng.idle and sim._gpu_wait[s]:
            sim._residency.serve_gpu_wait(s)

    def _stop_running(self, eng: _Engine, y: int, task: TaskInstance) -> None:
        """An admitted copy is cancelled: off its ride or the batch, its memory freed."""
        sim = self.sim
        if sim._rides is not None and task.resample_of is not None:
            sim._rides.cache.cancelled(y)
        riding = [i for i, (_, g) in enumerate(eng.marks) if g == -y - 1]
        if riding:
            eng.marks.pop(riding[0])
            heapq.heapify(eng.marks)
            assert sim._rides is not None  # riders exist only with --logits-cache
            del sim._rides.ride_steps[y]
        decoding = [i for i, (_, g) in enumerate(eng.marks) if g == y]
        if decoding:
            self.advance(eng)
            eng.marks.pop(decoding[0])
            heapq.heapify(eng.marks)
            eng.stop_decoding(task.prompt_tokens, task.output_tokens)
        if eng.kv is None or sim._kv is None:
            eng.release(task.prompt_tokens, task.output_tokens)
        else:
            private, seg = sim._kv.held.pop(y)
            eng.kv.release(seg)
            eng.release(private, 0)
        self.reschedule(eng)

    def tables_changed(self) -> None:
        """The decode tables were changed mid-run: every live engine re-reads them."""
        for engines in self.sim._engines:
            for engine in engines.values():
                engine.reload_step_tables(self.sim.tables)
