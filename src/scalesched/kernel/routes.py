"""The router's memory of where prompts went (``RouteMemory``): what the cache features of a
decision read, kept by the run ledger for every placement."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import TaskRequest


class RouteMemory:
    """What a router has sent to each engine, so that decisions can estimate what is cached
    where without reading any engine's cache (which a real router cannot see).

    The same bookkeeping as the ``cache_aware`` router's ``RouterTree`` (SGLang's), kept
    by the run ledger for every placement whoever made it: per engine (server, model), the
    application prompts (``prefix_id``, its tokens) and the calls (``call_key``, ending at
    prompt + estimated output) routed there, least recently routed forgotten first beyond
    the engine's KV capacity in tokens, and a server's whole memory forgotten when it dies.
    Only calls with a prefix identity are recorded; runs without any cost nothing.
    """

    __slots__ = ("_capacity", "_engines", "_where")

    def __init__(self, tables: ClusterTables) -> None:
        self._capacity = tables.kv_capacity.take(tables.class_or_zero)
        """(N, models) KV tokens of each engine (meaningful where feasible)."""
        self._engines: dict[tuple[int, int], tuple[OrderedDict[object, int], list[int]]] = {}
        """(server, model) -> (key -> own tokens, in routing order; [tokens held])."""
        self._where: dict[tuple[int, object], dict[int, int]] = {}
        """(model, key) -> {server: tokens the key's prefix ends at}."""

    def route(
        self,
        server: int,
        model: int,
        prefix_id: str,
        prefix_tokens: int,
        call_key: object,
        context_key: object | None,
        end_tokens: int,
    ) -> None:
        """A call was sent to ``server``: its application prompt and its own context (up to
        ``end_tokens`` = prompt + estimated output) are now expected cached there."""
        self._add(server, model, prefix_id, prefix_tokens, 0)
        where = self._where
        base = 0
        if context_key is not None:
            base = where.get((model, context_key), {}).get(server, 0)
        if not base:
            base = prefix_tokens
        self._add(server, model, call_key, end_tokens, base)

    def _add(self, server: int, model: int, key: object, end: int, base: int) -> None:
        engine = self._engines.get((server, model))
        if engine is None:
            engine = self._engines[(server, model)] = (OrderedDict(), [0])
        entries, held = engine
        if key in entries:
            entries.move_to_end(key)
            return
        own = max(end - base, 1)  # at least a token: the memory stays bounded by capacity
        entries[key] = own
        held[0] += own
        self._where.setdefault((model, key), {})[server] = end
        capacity = int(self._capacity[server, model])
        while held[0] > capacity and len(entries) > 1:
            old, old_own = entries.popitem(last=False)
            held[0] -= old_own
            self._forget(model, old, server)

    def _forget(self, model: int, key: object, server: int) -> None:
        servers = self._where.get((model, key))
        if servers is not None:
            servers.pop(server, None)
            if not servers:
                del self._where[(model, key)]

    def forget_server(self, server: int) -> None:
        """``server`` is gone and its caches with it."""
        for s, m in [k for k in self._engines if k[0] == server]:
            for key in self._engines.pop((s, m))[0]:
                self._forget(m, key, s)

    def cached(self, task: TaskRequest, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(N,) tokens of ``task``'s prompt expected cached on each server (its context
        where the session's previous call went, else its application prompt where one was
        routed), capped at the prompt; and (N,) 1.0 where that context is."""
        tokens, resident = np.zeros(n), np.zeros(n)
        if task.prefix_id is None:
            return tokens, resident
        m = task.model
        for s, end in self._where.get((m, task.prefix_id), {}).items():
            tokens[s] = end
        if task.context_key is not None:
            for s, end in self._where.get((m, task.context_key), {}).items():
                tokens[s] = max(tokens[s], end)
                resident[s] = 1.0
        np.minimum(tokens, task.prompt_tokens, out=tokens)
        return tokens, resident
