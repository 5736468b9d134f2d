"""The prefix cache: leaf-only eviction, held segments kept, policy orders, block reuse."""

from __future__ import annotations

import math

import pytest

from scalesched.cache.kv import (
    BLOCK_TOKENS,
    TTL_MAX_S,
    PrefixCache,
    cached_prefill,
    ttl_expiry,
)


def _chain(cache: PrefixCache, now: float = 0.0) -> None:
    """app(100) -> a(300) -> b(400), and app -> c(250)."""
    app = cache.insert("app", None, 100, now)
    a = cache.insert(1, app, 300, now + 1)
    cache.insert(2, a, 400, now + 2)
    cache.insert(3, app, 250, now + 3)


def test_tokens_and_residency_follow_the_tree() -> None:
    cache = PrefixCache("lru")
    _chain(cache)
    seg = cache.get(2)
    assert seg is not None and seg.tokens == 100 and seg.parent is cache.get(1)
    assert cache.resident == 100 + 200 + 100 + 150
    assert cache.evictable == cache.resident


def test_lru_evicts_leaves_only_oldest_first() -> None:
    cache = PrefixCache("lru")
    _chain(cache)
    # Leaves: 2 (t=2) and 3 (t=3). Freeing 1 token takes the oldest leaf, 2, only.
    assert cache.evict(1, now=10.0) == 100
    assert cache.get(2) is None and cache.get(1) is not None
    # Now 1 (t=1) is a leaf and older than 3: it goes next, the shared app prompt last.
    assert cache.evict(1, now=10.0) == 200
    assert cache.get(1) is None and cache.get(3) is not None
    assert cache.evict(10_000, now=10.0) == 150 + 100
    assert cache.resident == 0 and cache.evicted == 550


def test_held_chain_is_never_evicted_and_touch_refreshes() -> None:
    cache = PrefixCache("lru")
    _chain(cache)
    b = cache.get(2)
    cache.hold(b)
    cache.touch(b, 20.0)
    assert cache.held == 100 + 200 + 100
    assert cache.evict(10_000, now=30.0) == 150  # only c: b's chain is held
    cache.release(b)
    assert cache.evictable == 400
    assert cache.evict(1, now=30.0) == 100  # b is a leaf again
    assert cache.get(1) is not None


def test_ttl_protects_until_expiry_then_latest_expiry_first() -> None:
    cache = PrefixCache("ttl")
    app = cache.insert("app", None, 100, 0.0)
    cache.insert(1, app, 200, 0.0, expiry=5.0)  # protected until t=5
    cache.insert(2, app, 300, 1.0)  # unprotected, more recent
    assert cache.evict(1, now=2.0) == 200  # LRU would take 1; TTL takes the unprotected 2
    assert cache.get(1) is not None
    cache.insert(3, app, 260, 2.0, expiry=9.0)
    # Both protected: the one whose tool is expected back last (3) goes first.
    assert cache.evict(1, now=3.0) == 160
    assert cache.get(1) is not None
    # Past its expiry the segment is an ordinary LRU leaf.
    assert cache.evict(1, now=6.0) == 100


def test_agent_aware_credit_outweighs_recency() -> None:
    cache = PrefixCache("agent-aware")
    app = cache.insert("app", None, 100, 0.0)
    cache.insert(1, app, 200, 0.0, credit=6.0)  # a re-entered agent others wait on
    cache.insert(2, app, 200 + 50, 1.0)  # a one-off call, used later
    assert cache.evict(1, now=2.0) == 150
    assert cache.get(1) is not None
    lru = PrefixCache("lru")
    app = lru.insert("app", None, 100, 0.0)
    lru.insert(1, app, 200, 0.0)
    lru.insert(2, app, 250, 1.0)
    assert lru.evict(1, now=2.0) == 100  # without credit, the older one goes


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown KV policy"):
        PrefixCache("fifo")


@pytest.mark.parametrize(
    ("prompt", "cached", "skipped"),
    [(1000, 0, 0), (1000, 15, 0), (1000, 16, 16), (1000, 517, 512), (1000, 1000, 992), (1, 5, 0)],
)
def test_prefill_skips_whole_blocks_never_the_last_token(
    prompt: int, cached: int, skipped: int
) -> None:
    assert BLOCK_TOKENS == 16
    assert cached_prefill(prompt, cached) == skipped


def test_ttl_expiry() -> None:
    assert ttl_expiry(10.0, 2.0, False) == pytest.approx(10.0 + 1.5 * 2.0 + 0.5)
    assert ttl_expiry(10.0, 1e6, False) == 10.0 + TTL_MAX_S
    assert ttl_expiry(10.0, None, True) == 10.5
    assert ttl_expiry(10.0, None, False) == -math.inf


def test_a_finished_session_loses_its_credit() -> None:
    cache = PrefixCache("agent-aware")
    app = cache.insert("app", None, 100, 0.0)
    done = cache.insert(1, app, 200, 0.0, credit=6.0)  # credit from when it was live
    cache.insert(2, app, 250, 1.0)
    cache.hold(done)
    cache.drop_credit(done)  # its session ended
    cache.release(done)
    assert cache.evict(1, now=2.0) == 100  # now plain recency: the older one goes
    assert cache.get(2) is not None


def test_a_protected_leaf_queued_twice_is_evicted_once() -> None:
    """A request that holds a segment and gives it back without using it (the head of a
    queue waiting for memory) queues the leaf again at the same priority: eviction must
    count it once, and not fail on the second copy."""
    cache = PrefixCache("ttl")
    seg = cache.insert(1, None, 100, 0.0, expiry=50.0)
    for _ in range(2):
        cache.hold(seg)
        cache.release(seg)
    assert cache.evict(1000, now=1.0) == 100  # protected, but nothing else is left
    assert cache.get(1) is None and cache.resident == 0 and cache.evicted == 100
