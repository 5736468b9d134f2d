"""SGLang's cache-aware router as a baseline: route a call where its prefix is cached,
unless that would unbalance the engines.

Like the real router, it sees no engine's cache: it keeps its own approximate tree per
engine of what it has sent there (each call's application prompt and its context, with
the estimated output), evicted least recently routed first beyond the engine's KV
capacity. For an LLM call with a prefix identity:

1. If the load is imbalanced (most loaded minus least loaded feasible server, in placed
   and unfinished tasks, above ``BALANCE_ABS`` and above ``BALANCE_REL`` x the least),
   the call goes to the least loaded server.
2. Otherwise to the server whose tree matches the most of its prompt, if that match is at
   least ``CACHE_THRESHOLD`` of the prompt;
3. else to the least loaded server (SGLang picks the smallest tree; with trees bounded by
   each engine's KV capacity the least loaded server is the closest stand-in here).

Tools, and calls without a prefix identity, go to the least loaded server (fewest placed,
unfinished tasks; ties: lowest index). Defaults are the router's
(``--cache-threshold 0.5 --balance-abs-threshold 32 --balance-rel-threshold 1.0001``).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler

CACHE_THRESHOLD = 0.5
BALANCE_ABS = 32
BALANCE_REL = 1.0001


class RouterTree:
    """What a router believes one engine caches: key -> tokens, in routing order, with the
    time each key was last used (``tao`` decays its cache credit by it)."""

    __slots__ = ("entries", "tokens", "capacity")

    def __init__(self, capacity: int) -> None:
        self.entries: OrderedDict[object, tuple[int, int, float]] = OrderedDict()
        """key -> (end, own tokens above its base, last use)."""
        self.tokens = 0
        self.capacity = capacity

    def match(self, keys: tuple[object, ...]) -> int:
        """Tokens of the longest cached prefix among ``keys`` (deepest first)."""
        return self.match_with_use(keys)[0]

    def match_with_use(self, keys: tuple[object, ...]) -> tuple[int, float]:
        """(tokens, last use) of the longest cached prefix among ``keys``; (0, 0.0) if none
        is held."""
        for key in keys:
            entry = self.entries.get(key)
            if entry is not None:
                return entry[0], entry[2]
        return 0, 0.0

    def add(self, key: object, end: int, base: int, used_at: float = 0.0) -> None:
        """Record ``key`` (ending at ``end`` tokens, its own part above ``base``) as most
        recent, used at ``used_at``; forget the least recent beyond capacity."""
        entry = self.entries.get(key)
        if entry is not None:
            self.entries[key] = (entry[0], entry[1], max(entry[2], used_at))
            self.entries.move_to_end(key)
            return
        own = max(end - base, 0)
        self.entries[key] = (end, own, used_at)
        self.tokens += own
        while self.tokens > self.capacity and len(self.entries) > 1:
            _, (_, old_own, _) = self.entries.popitem(last=False)
            self.tokens -= old_own


class CacheAwareScheduler(BaseScheduler):
    name = "cache_aware"
    places_only = True  # sim.compiled_loop: answers with a server only

    def __init__(self) -> None:
        self._trees: dict[tuple[int, int], RouterTree] = {}

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self._trees = {}

    def select(self, decision: Decision) -> int:
        mask = decision.mask
        load = np.where(mask, decision.n_assigned, np.inf)
        least = int(np.argmin(load))
        task = decision.task
        if task.kind != "llm" or task.prefix_id is None:
            return least
        lo, hi = float(load[least]), float(np.max(decision.n_assigned[mask]))
        keys: tuple[object, ...] = (
            (task.context_key, task.prefix_id) if task.context_key else (task.prefix_id,)
        )
        if hi - lo > BALANCE_ABS and hi > BALANCE_REL * lo:
            choice = least
        else:
            choice, best = least, 0
            for s in np.flatnonzero(mask).tolist():
                tree = self._trees.get((s, task.model))
                matched = tree.match(keys) if tree is not None else 0
                if matched > best:
                    choice, best = s, matched
            if best < CACHE_THRESHOLD * max(task.prompt_tokens, 1):
                choice = least
        self._route(decision, choice)
        return choice

    def _route(self, decision: Decision, s: int) -> None:
        """Remember what the call leaves cached on server ``s``."""
        task = decision.task
        tree = self._trees.get((s, task.model))
        if tree is None:
            tables = decision.tables
            capacity = int(tables.kv_capacity[tables.class_or_zero[s, task.model]])
            tree = self._trees[(s, task.model)] = RouterTree(capacity)
        tree.add(task.prefix_id, task.prefix_tokens, 0)
        end = task.prompt_tokens + task.output_tokens_est
        base = tree.match((task.context_key, task.prefix_id))  # context, else the app prompt
        tree.add(task.call_key, end, base)
