"""The compiled core's prefix cache (``sim/_core/prefix_cache.hpp``) against
``cache.kv.PrefixCache``, its specification: random sequences of inserts, holds, releases,
touches, credit drops and evictions under each policy leave the same segments (in the
same order, every field exact), the same counters, and evict the same tokens, through
heap rebuilds and leaves queued more than once; a copy goes on as the original would."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalesched.cache.kv import AGENT_HORIZON_S, KV_POLICIES, PrefixCache, Segment
from scalesched.sim import core

pytestmark = pytest.mark.skipif(
    not core.compiled_available(), reason="the compiled core is not built in this install"
)

PREFIXES = ("app-a", "app-b", "app-c")


def cpp_cache(policy: str) -> Any:
    """The compiled twin of ``PrefixCache(policy)``."""
    ext: Any = core._EXTENSION
    return ext.PrefixCache(KV_POLICIES.index(policy), AGENT_HORIZON_S)


def cpp_key(key: object) -> int:
    """The compiled cache's integer key: a task id, or a prefix id as a negative number."""
    return key if isinstance(key, int) else -1 - PREFIXES.index(str(key))


def py_key(key: int) -> object:
    return key if key >= 0 else PREFIXES[-1 - key]


def state_of_python(cache: PrefixCache) -> list[Any]:
    def parent(seg: Segment) -> object:
        return None if seg.parent is None else seg.parent.key

    segments = [
        (key, parent(s), s.end, s.tokens, s.children, s.refs, s.last, s.bonus, s.prio, s.expiry)
        for key, s in cache.segments.items()
    ]
    return [cache.resident, cache.held, cache.evicted, cache.evictable, segments]


def state_of_cpp(cache: Any) -> list[Any]:
    segments = []
    for sid in cache.ids():
        key, parent, *rest = cache.segment(sid)
        parent_key = None if parent < 0 else py_key(cache.segment(parent)[0])
        segments.append((py_key(key), parent_key, *rest))
    return [cache.resident, cache.held, cache.evicted, cache.evictable, segments]


def same(a: list[Any], b: list[Any]) -> None:
    """Exactly equal, floats compared by their bits (NaN-free here)."""
    assert repr(a) == repr(b)


KEYS = st.one_of(st.integers(0, 40), st.sampled_from(PREFIXES))


@settings(max_examples=60, deadline=None)
@given(policy=st.sampled_from(KV_POLICIES), data=st.data())
def test_random_operations_leave_the_same_cache(policy: str, data: st.DataObject) -> None:
    ours = PrefixCache(policy)
    theirs = cpp_cache(policy)
    now = 0.0
    holds: list[object] = []  # keys of the segments a request holds (one entry per hold)
    key: object
    for _ in range(data.draw(st.integers(20, 250))):
        cached = list(ours.segments)
        op = data.draw(
            st.sampled_from(["insert", "hold", "release", "touch", "drop", "evict", "churn"])
        )
        now += data.draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.7]))
        if op == "insert":
            key = data.draw(KEYS)
            parent = data.draw(st.sampled_from([None, *cached]))
            base = ours.segments[parent].end if parent is not None else 0
            end = base + data.draw(st.integers(1, 400))
            expiry = data.draw(st.sampled_from([-math.inf, now + 2.0, now + 30.0]))
            credit = data.draw(st.sampled_from([0.0, 1.0, 6.0]))
            p_seg = ours.segments[parent] if parent is not None else None
            ours.insert(key, p_seg, end, now, expiry=expiry, credit=credit)
            p_id = theirs.get(cpp_key(parent)) if parent is not None else -1
            theirs.insert(cpp_key(key), p_id, end, now, expiry, credit)
        elif op == "hold" and cached:
            key = data.draw(st.sampled_from(cached))
            ours.hold(ours.segments[key])
            theirs.hold(theirs.get(cpp_key(key)))
            holds.append(key)
        elif op == "churn" and cached:  # held and given back unused: queued again each time
            key = data.draw(st.sampled_from(cached))
            for _ in range(data.draw(st.sampled_from([1, 2, 40]))):  # 40: heap rebuilds
                ours.hold(ours.segments[key])
                theirs.hold(theirs.get(cpp_key(key)))
                ours.release(ours.segments[key])
                theirs.release(theirs.get(cpp_key(key)))
        elif op == "release" and holds:
            key = holds.pop(data.draw(st.integers(0, len(holds) - 1)))
            ours.release(ours.segments[key])
            theirs.release(theirs.get(cpp_key(key)))
        elif op == "touch" and cached:
            key = data.draw(st.sampled_from(cached))
            ours.touch(ours.segments[key], now)
            theirs.touch(theirs.get(cpp_key(key)), now)
        elif op == "drop" and cached:
            key = data.draw(st.sampled_from(cached))
            ours.drop_credit(ours.segments[key])
            theirs.drop_credit(theirs.get(cpp_key(key)))
        elif op == "evict":
            need = data.draw(st.integers(1, 1500))
            assert ours.evict(need, now) == theirs.evict(need, now)
        same(state_of_python(ours), state_of_cpp(theirs))
    copy = theirs.copy()  # a fork's cache goes on alone, as the original would
    freed = ours.evict(10**9, now + 100.0)
    assert copy.evict(10**9, now + 100.0) == freed
    same(state_of_python(ours), state_of_cpp(copy))
    assert theirs.evicted == copy.evicted - freed  # the original did not move


def test_an_eviction_goes_on_in_the_heap_it_started_on() -> None:
    """When an offer inside ``evict`` rebuilds the heap (a dropped leaf's parent becomes a
    leaf while the heap is at its size limit), Python's ``evict`` goes on popping the heap
    it started on, so a parent that becomes a leaf after the rebuild waits for the next
    eviction: the C++ cache must make the same choice. Whether the rebuild falls inside
    the eviction depends on how many stale entries came before, so every count of them
    up to past the limit is tried."""
    freed_seen = set()
    for churns in range(130):
        ours = PrefixCache("lru")
        theirs = cpp_cache("lru")
        for root, child, start in (("app-a", 1, 0.0), ("app-b", 7, 0.5)):  # two chains
            seg = ours.insert(root, None, 100, start)
            ours.insert(child, seg, 150 if child == 1 else 130, start)
            sid = theirs.insert(cpp_key(root), -1, 100, start, -math.inf, 0.0)
            theirs.insert(child, sid, 150 if child == 1 else 130, start, -math.inf, 0.0)
        for key in range(2, 7):  # younger leaves
            ours.insert(key, None, 10, float(key))
            theirs.insert(key, -1, 10, float(key), -math.inf, 0.0)
        for _ in range(churns):  # stale entries
            ours.hold(ours.segments[6])
            ours.release(ours.segments[6])
            theirs.hold(theirs.get(6))
            theirs.release(theirs.get(6))
        freed = ours.evict(190, 7.0)
        assert theirs.evict(190, 7.0) == freed, churns
        same(state_of_python(ours), state_of_cpp(theirs))
        freed_seen.add(freed)
    # both chains (280), or the second root waited for a younger leaf (190)
    assert freed_seen == {190, 280}
