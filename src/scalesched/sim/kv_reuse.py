"""KV reuse across calls (``--kv-policy``), a part of the simulation: admission against an
engine's prefix cache (a request reserves only the KV its cached prefix does not cover),
the segments a call leaves for its session's next turn, and the measurements ``KVRecord``
carries. ``cache/kv.py`` has the cache model; this is how the simulator runs it."""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING

import numpy as np

from scalesched.cache.kv import NO_CACHE, PrefixCache, Segment, cached_prefill, ttl_expiry
from scalesched.cluster.tables import MODEL_INDEX
from scalesched.kernel.metrics import KVRecord, packed
from scalesched.sim.events import PREFILL_DONE as _PREFILL_DONE
from scalesched.sim.gpu_engine import SimEngine as _Engine
from scalesched.workload.instance import TaskInstance

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


def _deepest(kv: PrefixCache, chain: list[tuple[object, int]]) -> Segment | None:
    """The deepest segment of ``chain`` (deepest first) the cache holds."""
    for key, _ in chain:
        seg = kv.get(key)
        if seg is not None:
            return seg
    return None


def _agent(chain: list[tuple[object, int]]) -> int:
    """The agent of a call that continues a session: the session's first call (the last
    task id of its chain)."""
    return next(k for k, _ in reversed(chain) if isinstance(k, int))


class KvReuse:
    """A ``--kv-policy`` run's KV reuse, a part of the simulation: admission against the
    engines' prefix caches, what each admitted call holds, and the measurements ``KVRecord``
    carries."""

    def __init__(self, sim: Simulation, policy: str) -> None:
        self.sim = sim
        self.reuse = policy != NO_CACHE
        """False: measure only, cache nothing (``nocache``)."""
        self.policy = policy
        self.eviction = policy if self.reuse else "lru"
        PrefixCache(self.eviction)  # unknown policies fail here, before the run starts
        self.held: dict[int, tuple[int, Segment | None]] = {}
        """Per admitted call: (KV tokens it reserves for itself, the deepest segment held)."""
        self.reentries: dict[int, int] = {}
        """Re-entries of each agent so far (observable: the engine counts them)."""
        self.lost = 0
        self._call_jobs, self._prompt, self._cached = array("q"), array("q"), array("q")
        self._ttft_jobs, self._ttft = array("q"), array("d")
        self._re_agents, self._re_jobs = array("q"), array("q")
        self._re_miss, self._re_moved = array("b"), array("b")

    def calls(self, ji: int, prompt: int, cached: int) -> None:
        self._call_jobs.append(ji)
        self._prompt.append(prompt)
        self._cached.append(cached)

    def ttft(self, ji: int, seconds: float) -> None:
        self._ttft_jobs.append(ji)
        self._ttft.append(seconds)

    def reentry(self, agent: int, ji: int, miss: bool, moved: bool) -> None:
        self.reentries[agent] = self.reentries.get(agent, 0) + 1
        self._re_agents.append(agent)
        self._re_jobs.append(ji)
        self._re_miss.append(miss)
        self._re_moved.append(moved)

    def absorb(
        self,
        call_jobs: list[int],
        prompt: list[int],
        cached: list[int],
        ttft_jobs: list[int],
        ttft_s: list[float],
        reentry_agents: list[int],
        reentry_jobs: list[int],
        reentry_miss: list[int],
        reentry_moved: list[int],
        reentries: list[tuple[int, int]],
        evicted: int,
    ) -> None:
        """What a compiled run kept (``EventRun.kv_records``), appended to this run's
        records. Its engines' caches stayed in C++, so the tokens they evicted (``evicted``:
        unloaded with their engine, or evicted from a live cache) are counted in ``lost``."""
        self._call_jobs.extend(call_jobs)
        self._prompt.extend(prompt)
        self._cached.extend(cached)
        self._ttft_jobs.extend(ttft_jobs)
        self._ttft.extend(ttft_s)
        self._re_agents.extend(reentry_agents)
        self._re_jobs.extend(reentry_jobs)
        self._re_miss.extend(reentry_miss)
        self._re_moved.extend(reentry_moved)
        for agent, count in reentries:
            self.reentries[agent] = self.reentries.get(agent, 0) + count
        self.lost += evicted

    def record(self, evicted: int) -> KVRecord:
        a = packed
        return KVRecord(
            policy=self.policy,
            call_jobs=a(self._call_jobs, np.int64),
            prompt_tokens=a(self._prompt, np.int64),
            cached_tokens=a(self._cached, np.int64),
            ttft_jobs=a(self._ttft_jobs, np.int64),
            ttft_s=a(self._ttft, np.float64),
            reentry_agents=a(self._re_agents, np.int64),
            reentry_jobs=a(self._re_jobs, np.int64),
            reentry_miss=a(self._re_miss, np.int8).astype(bool),
            reentry_moved=a(self._re_moved, np.int8).astype(bool),
            evicted_tokens=int(evicted),
        )

    def admit(self, eng: _Engine, kv: PrefixCache) -> None:
        """``LlmServing.admit`` with a prefix cache: a request reserves only the KV its
        cached prefix does not cover, evicts cached segments to make room (never those it
        reuses), and prefills only its uncached tokens."""
        sim = self.sim
        run = self
        tasks_of = sim._task
        waiting = eng.waiting
        now = sim.now
        while waiting and eng.n_active < eng.max_batch:
            gid = waiting[0]
            task = tasks_of(gid)
            prompt, output = task.prompt_tokens, task.output_tokens
            chain = self.chain(gid, task)
            seg = _deepest(kv, chain) if run.reuse else None
            base = seg.end if seg is not None else 0
            private = prompt + output - base
            kv.hold(seg)
            room = eng.kv_cap - eng.kv_used
            if private > room:
                if eng.n_active and private > room + kv.evictable:
                    kv.release(seg)
                    break  # FIFO: the head waits for memory
                eng.kv_used -= kv.evict(private - room, now)
            waiting.popleft()
            kv.touch(seg, now)
            eng.admit(private, 0)
            run.held[gid] = (private, seg)
            hit = cached_prefill(prompt, base)
            ji = sim.tasks.job_of[gid]
            run.calls(ji, prompt, hit)
            if task.context_of is not None and chain:
                ctx = chain[0][0]
                assert isinstance(ctx, int)
                miss = seg is None or seg.key != ctx
                moved = sim.server[ctx] != eng.server  # placed away from its context
                run.reentry(_agent(chain), ji, miss, moved)
            sim.started_at[gid] = now
            prefill = prompt - hit
            if hit and sim.skipped_s is not None:
                sim.skipped_s[gid] = eng.perf.prefill_s(prompt) - eng.perf.prefill_s(prefill)
            if task.resample_of is not None and sim._rides is not None:
                prefill += sim._rides.admit(eng, gid, task)
            sim._push(now + eng.perf.prefill_s(prefill), _PREFILL_DONE, gid, 0)
        sim._llm.refresh_busy(eng)

    def chain(self, gid: int, task: TaskInstance) -> list[tuple[object, int]]:
        """The cache segments call ``gid``'s prompt starts with, deepest first, as (key,
        end): the calls of its session context (keyed by task id), then its application
        prompt (keyed by prefix id). Empty for a call with no prefix identity."""
        sim = self.sim
        if task.prefix_id is None:
            return []
        chain: list[tuple[object, int]] = []
        c = task.context_of
        if c is not None:
            ji = sim.tasks.job_of[gid]
            off = sim.tasks.offset[ji]
            tasks = sim.jobs[ji].workflow.tasks
            while c is not None:
                t = tasks[c]
                chain.append((off + c, t.prompt_tokens + t.output_tokens))
                c = t.context_of
        if task.prefix_tokens > 0:
            chain.append((task.prefix_id, task.prefix_tokens))
        return chain

    def prefilled(self, kv: PrefixCache, gid: int, task: TaskInstance) -> None:
        """The prompt is computed: its prefix segments are cached (held by the request
        until it ends), taken out of what the request reserves for itself."""
        sim = self.sim
        run = self
        run.ttft(sim.tasks.job_of[gid], sim.now - sim.landed_at[gid])
        chain = self.chain(gid, task)
        if not chain or not run.reuse:
            return
        private, seg = run.held[gid]
        base = seg.end if seg is not None else 0
        top = _deepest(kv, chain)
        already = (top.end if top is not None else 0) - base  # cached by others meanwhile
        leaf = top
        keys = [key for key, _ in chain]
        missing = keys.index(top.key) if top is not None else len(chain)
        for key, end in reversed(chain[:missing]):
            leaf = kv.insert(key, leaf, end, sim.now)
        kv.hold(leaf)
        kv.release(seg)
        engine = sim._engines[sim.server[gid]][MODEL_INDEX[task.model or ""]]
        engine.kv_used -= already
        run.held[gid] = (private - (chain[0][1] - base), leaf)

    def finished(self, eng: _Engine, kv: PrefixCache, gid: int, task: TaskInstance) -> None:
        """The call ends: its context (prompt + output) stays cached for the session's next
        turn unless evicted; the rest of its reservation is freed."""
        sim = self.sim
        run = self
        private, seg = run.held.pop(gid)
        if task.prefix_id is not None and run.reuse:
            key = sim.origin[gid]
            end = task.prompt_tokens + task.output_tokens
            tokens = end - (seg.end if seg is not None else 0)
            if kv.get(key) is None:
                expiry, credit = self.terms(kv.policy, key, task)
                if credit == 0.0 and kv.policy == "agent-aware":
                    kv.drop_credit(seg)  # the session ends here: its chain keeps no credit
                kv.insert(key, seg, end, sim.now, expiry=expiry, credit=credit)
            else:
                eng.kv_used -= tokens  # a hedged copy cached it first
            private -= tokens
        kv.release(seg)
        eng.release(private, 0)

    def terms(self, policy: str, gid: int, task: TaskInstance) -> tuple[float, float]:
        """(TTL expiry, agent-aware credit) of a finished call's segment, from what the
        engine can observe: the workflow's visible structure, estimates and counts."""
        sim = self.sim
        if policy == "lru":
            return -math.inf, 0.0
        ji = sim.tasks.job_of[gid]
        off = sim.tasks.offset[ji]
        wf = sim.jobs[ji].workflow
        i = gid - off
        if policy == "ttl":
            tool_s: float | None = None
            continues = False
            speed = sim.tables.mean_core_speed
            for c in wf.children[i]:
                child = wf.tasks[c]
                if child.kind == "tool":
                    est = child.cpu_work / speed + child.ext_latency_est
                    tool_s = est if tool_s is None else max(tool_s, est)
                elif child.context_of == i:
                    continues = True
            return ttl_expiry(sim.now, tool_s, continues), 0.0
        agent = _agent(self.chain(gid, task)) if task.context_of is not None else gid
        waiting, continues = self.waiting_on(ji, i)
        if not continues:
            return -math.inf, 0.0
        return -math.inf, float(waiting * (1 + self.reentries.get(agent, 0)))

    def waiting_on(self, ji: int, i: int) -> tuple[int, bool]:
        """Unfinished tasks of job ``ji`` downstream of task ``i`` that exist already (not
        hidden behind a decision still to be made), and whether one of them continues
        ``i``'s context (its session goes on)."""
        sim = self.sim
        wf = sim.jobs[ji].workflow
        off = sim.tasks.offset[ji]
        done = sim.task_done
        seen: set[int] = set()
        continues = False
        stack = list(wf.children[i])
        while stack:
            c = stack.pop()
            if c in seen or done[off + c]:
                continue
            rb = wf.tasks[c].revealed_by
            if rb is not None and rb != i and not done[off + rb]:
                continue
            seen.add(c)
            continues = continues or wf.tasks[c].context_of == i
            stack.extend(wf.children[c])
        return len(seen), continues
