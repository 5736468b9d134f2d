"""A per-engine prefix cache of KV state, and the eviction policies that keep it in memory.

Model (docs/cache.md, "KV state"): what an engine keeps is a tree of *segments*, each the
KV of a run of tokens whose prefix is its parent's:

* the root segments are application prompts (system prompt and tool schema), keyed by
  their ``prefix_id`` and shared by every workflow of the application;
* below them, one segment per finished LLM call that may be continued: the tokens its
  prompt added after its context, plus its output (keyed by the call's global task id). A
  session's next turn, or a branch re-sampling from a common point, extends it.

This is a radix tree at the granularity of a call: every call's prompt is exactly its
context plus new tokens (:mod:`scalesched.workload.sessions`), so no finer split can ever
match. Reuse is counted in blocks of :data:`BLOCK_TOKENS` tokens, as block-hash caches
(vLLM, SGLang with page size 16) do: a call skips the prefill of
``min(cached, prompt - 1)`` rounded down to a whole block (the last prompt token is always
computed, for its logits). Memory is counted in tokens, without the partial-block waste.

A segment is usable only with all its ancestors, so eviction removes leaves only
(``children == 0``) and never a segment a running request holds (``refs > 0``: every
segment on the chain of an admitted request is held until it ends). Which evictable leaf
goes first is the policy's:

``lru``
    least recently used (a use touches the whole chain).
``ttl``
    Continuum-style: a call that hands its session to a tool keeps its segment protected
    for ``TTL_MARGIN x`` the tool's predicted duration plus ``TTL_SLACK_S`` (capped at
    ``TTL_MAX_S``); protected leaves go only when nothing unprotected is left, latest
    expiry first (the tool expected back last); the rest in LRU order.
``agent-aware``
    Hive-style: a segment's priority is its last use plus ``AGENT_HORIZON_S x
    ln(1 + credit)``, with credit = (tasks of its workflow waiting on the call) x (1 +
    the agent's re-entries so far) when a visible later call continues its session, else
    0: a coordinator others wait on, a hotspot agent re-entered often, keeps its KV longer
    than a one-off call used as recently; a session that ends takes the credit off its
    whole chain (``drop_credit``); lowest first.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Literal

BLOCK_TOKENS = 16
"""Tokens per KV block: reuse is counted in whole blocks."""

KVPolicy = Literal["lru", "ttl", "agent-aware"]
KV_POLICIES: tuple[str, ...] = ("lru", "ttl", "agent-aware")
NO_CACHE = "nocache"
"""``--kv-policy nocache``: engines keep nothing between calls (as with the cache off) but
the cache metrics are measured: the memoryless baseline's TTFT."""
KV_MODES: tuple[str, ...] = (NO_CACHE, *KV_POLICIES)

TTL_MARGIN = 1.5
"""Protection lasts this multiple of the predicted tool time (tools overrun estimates)."""
TTL_SLACK_S = 0.5
"""Seconds added to every protection: the tool result still travels back and queues."""
TTL_MAX_S = 30.0
"""Longest protection: past it, recomputing is cheaper than holding memory (Continuum
bounds its TTL the same way)."""
AGENT_HORIZON_S = 10.0
"""Seconds of recency one unit of ``ln(1 + credit)`` is worth under ``agent-aware``."""


class Segment:
    """One cached run of tokens: ``end`` is its last token's position in the prompt."""

    __slots__ = (
        "key",
        "parent",
        "end",
        "tokens",
        "children",
        "refs",
        "last",
        "bonus",
        "prio",
        "expiry",
    )

    def __init__(self, key: object, parent: Segment | None, end: int, now: float) -> None:
        self.key = key
        self.parent = parent
        self.end = end
        self.tokens = end - (parent.end if parent is not None else 0)
        self.children = 0
        self.refs = 0
        self.last = now
        self.bonus = 0.0
        """Seconds of recency the policy credits it with (``agent-aware``)."""
        self.prio = now
        self.expiry = -math.inf


class PrefixCache:
    """The segments one engine holds, with its eviction policy (see the module docstring)."""

    def __init__(self, policy: str) -> None:
        if policy not in KV_POLICIES:
            raise ValueError(f"unknown KV policy {policy!r}; known: {', '.join(KV_POLICIES)}")
        self.policy = policy
        self.segments: dict[object, Segment] = {}
        self.resident = 0
        """Tokens held by cached segments."""
        self.held = 0
        """Tokens of the segments running requests hold (not evictable)."""
        self.evicted = 0
        """Tokens evicted so far."""
        self._heap: list[tuple[float, int, Segment]] = []
        self._seq = itertools.count()

    @property
    def evictable(self) -> int:
        return self.resident - self.held

    def get(self, key: object) -> Segment | None:
        return self.segments.get(key)

    # -- use --------------------------------------------------------------------------
    def hold(self, seg: Segment | None) -> None:
        """A request uses ``seg`` and its ancestors: not evictable until ``release``."""
        while seg is not None:
            if seg.refs == 0:
                self.held += seg.tokens
            seg.refs += 1
            seg = seg.parent

    def release(self, seg: Segment | None) -> None:
        while seg is not None:
            seg.refs -= 1
            if seg.refs == 0:
                self.held -= seg.tokens
                self._offer(seg)
            seg = seg.parent

    def drop_credit(self, seg: Segment | None) -> None:
        """The agent of this held chain is done: its segments keep no credit (``agent-aware``:
        a finished session must not outrank live ones)."""
        while seg is not None:
            if seg.bonus:
                seg.bonus = 0.0
                seg.prio = seg.last
            seg = seg.parent

    def touch(self, seg: Segment | None, now: float) -> None:
        """``seg`` and its ancestors were used at ``now`` (held: requeued on release)."""
        while seg is not None:
            seg.last = now
            seg.prio = now + seg.bonus
            seg = seg.parent

    def insert(
        self,
        key: object,
        parent: Segment | None,
        end: int,
        now: float,
        *,
        expiry: float = -math.inf,
        credit: float = 0.0,
    ) -> Segment:
        """Cache a segment below ``parent`` (resident) ending at ``end``; returns it (the
        one already cached under ``key`` if any)."""
        seg = self.segments.get(key)
        if seg is not None:
            return seg
        seg = Segment(key, parent, end, now)
        seg.expiry = expiry
        if self.policy == "agent-aware" and credit > 0:
            seg.bonus = AGENT_HORIZON_S * math.log1p(credit)
            seg.prio = now + seg.bonus
        self.segments[key] = seg
        self.resident += seg.tokens
        if parent is not None:
            parent.children += 1
        self._offer(seg)
        return seg

    # -- eviction ---------------------------------------------------------------------
    def evict(self, need: int, now: float) -> int:
        """Evict leaves in policy order until ``need`` tokens are freed or nothing is
        evictable; returns the tokens freed."""
        freed = 0
        protected: list[tuple[float, int, Segment]] = []
        heap = self._heap
        while freed < need and heap:
            prio, seq, seg = heapq.heappop(heap)
            if not self._evictable(seg, prio):
                continue
            if seg.expiry > now:
                protected.append((seg.expiry, seq, seg))
                continue
            freed += self._drop(seg)
        if freed < need and protected:  # the one needed furthest ahead goes first
            protected.sort(key=lambda e: (-e[0], e[1]))
            i = 0
            while freed < need and i < len(protected):
                seg = protected[i][2]
                if self.segments.get(seg.key) is seg:  # a leaf queued twice is here twice
                    freed += self._drop(seg)
                i += 1
            protected = protected[i:]
        for _, seq, seg in protected:  # still cached: back in the queue
            heapq.heappush(heap, (seg.prio, seq, seg))
        return freed

    def _drop(self, seg: Segment) -> int:
        del self.segments[seg.key]
        self.resident -= seg.tokens
        self.evicted += seg.tokens
        parent = seg.parent
        seg.parent = None
        if parent is not None:
            parent.children -= 1
            self._offer(parent)
        return seg.tokens

    def _evictable(self, seg: Segment, prio: float) -> bool:
        """Whether a heap entry still stands for an evictable leaf at its priority."""
        return (
            seg.prio == prio
            and seg.refs == 0
            and seg.children == 0
            and self.segments.get(seg.key) is seg
        )

    def _offer(self, seg: Segment) -> None:
        """Queue a segment that may have become evictable (stale entries are skipped)."""
        if seg.refs == 0 and seg.children == 0:
            heapq.heappush(self._heap, (seg.prio, next(self._seq), seg))
            if len(self._heap) > 4 * len(self.segments) + 64:
                self._compact()

    def _compact(self) -> None:
        self._heap = [
            (s.prio, next(self._seq), s)
            for s in self.segments.values()
            if s.refs == 0 and s.children == 0
        ]
        heapq.heapify(self._heap)


def cached_prefill(prompt: int, cached: int) -> int:
    """Prompt tokens a call skips when ``cached`` of its first tokens are in the cache:
    whole blocks, never the last prompt token."""
    usable = min(cached, prompt - 1)
    return usable // BLOCK_TOKENS * BLOCK_TOKENS if usable > 0 else 0


def ttl_expiry(now: float, tool_s: float | None, continues: bool) -> float:
    """When a finished call's protection ends: ``tool_s`` is the predicted duration of the
    tool it hands its session to (None: none); ``continues``: its session goes on without
    a tool (a next turn or branches follow at once)."""
    if tool_s is not None:
        return now + min(TTL_MARGIN * tool_s + TTL_SLACK_S, TTL_MAX_S)
    return now + TTL_SLACK_S if continues else -math.inf
