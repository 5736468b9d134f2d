"""The cache metrics: hotspot agents, hit rate and TTFT over the measured workflows."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.kernel.metrics import KVRecord, kv_metrics


def _record(agents: list[int], miss: list[bool], moved: list[bool], jobs: list[int]) -> KVRecord:
    return KVRecord(
        policy="lru",
        call_jobs=np.array([0, 1, 2]),
        prompt_tokens=np.array([1000, 2000, 4000]),
        cached_tokens=np.array([0, 1000, 4000]),
        ttft_jobs=np.array([0, 1, 2]),
        ttft_s=np.array([1.0, 3.0, 100.0]),
        reentry_agents=np.array(agents),
        reentry_jobs=np.array(jobs),
        reentry_miss=np.array(miss),
        reentry_moved=np.array(moved),
        evicted_tokens=7,
    )


def test_hotspots_are_the_top_decile_by_re_entries() -> None:
    # Ten agents re-entered once (agent ids 0-9), one re-entered five times (id 99).
    agents = list(range(10)) + [99] * 5
    miss = [True] * 10 + [False, False, False, True, True]
    moved = [False] * 13 + [True, False]
    m = kv_metrics(_record(agents, miss, moved, [0] * 15), np.array([True, True, False]))
    assert m["hotspot_agents"] == 1
    assert m["hotspot_miss_rate"] == pytest.approx(2 / 5)
    assert m["hotspot_stay_miss_rate"] == pytest.approx(1 / 4)  # the moved miss left out
    assert m["reentry_miss_rate"] == pytest.approx(12 / 15)
    assert m["reentry_moved_rate"] == pytest.approx(1 / 15)
    # Workflow 2 is not measured: its call and TTFT are left out.
    assert m["prefix_hit_rate"] == pytest.approx(1000 / 3000)
    assert m["ttft_mean_s"] == pytest.approx(2.0)
    assert m["evicted_tokens"] == 7


def test_agents_with_equal_counts_share_a_verdict() -> None:
    # 20 agents: 17 re-entered once, 3 twice. No agent is above 90% of the others.
    agents = list(range(17)) + [50, 50, 51, 51, 52, 52]
    n = len(agents)
    m = kv_metrics(_record(agents, [True] * n, [False] * n, [0] * n), np.ones(3, dtype=bool))
    assert m["hotspot_agents"] == 0 and m["hotspot_miss_rate"] == 0.0
    # One more agent re-entered three times: above 20 of 21 agents (95%), a hotspot.
    agents += [60, 60, 60]
    n = len(agents)
    m = kv_metrics(_record(agents, [True] * n, [False] * n, [0] * n), np.ones(3, dtype=bool))
    assert m["hotspot_agents"] == 1
