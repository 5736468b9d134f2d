"""The shared LLM-engine model: admission by batch cap and KV memory, decode-step times
from the cluster tables, and least-recently-used eviction."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import MAX_BATCH_TABLE, ClusterTables
from scalesched.kernel.llm_engine import EngineBatch, lru_evictions


@pytest.fixture(scope="module")
def tables() -> ClusterTables:
    return ClusterTables(get_cluster("hetero-4"))


def test_admission_needs_a_slot_and_kv_memory_but_an_empty_batch_takes_anything(
    tables: ClusterTables,
) -> None:
    batch = EngineBatch(tables, 0)
    cap = batch.kv_cap
    assert batch.fits(cap + 10, 5)  # larger than the whole memory: runs alone
    batch.admit(cap // 2, 0)
    assert batch.fits(cap // 2, 0)
    assert not batch.fits(cap // 2 + 1, 0)
    batch.release(cap // 2, 0)
    assert (batch.n_active, batch.kv_used) == (0, 0)
    batch.max_batch = 2
    batch.admit(1, 1)
    batch.admit(1, 1)
    assert not batch.fits(1, 1)  # the batch is full whatever the memory


def test_step_time_is_the_tables_linearisation_of_the_perf_model(tables: ClusterTables) -> None:
    k = 1
    batch = EngineBatch(tables, k)
    steps = [batch.start_decoding(300, 101), batch.start_decoding(40, 0)]
    assert steps == [101, 1]  # one token a step, at least one step
    ctx = 300 + 50 + 40
    assert batch.step_s() == tables.decode_lin[k, 2] + tables.decode_attn[k] * ctx
    assert batch.step_s() == pytest.approx(tables.engines[k].decode_step_s(2, ctx), rel=1e-9)
    batch.stop_decoding(40, 0)
    batch.stop_decoding(300, 101)
    assert (batch.n_decoding, batch.ctx_sum, batch.step_s()) == (0, 0, 0.0)


def test_batches_past_the_table_cost_its_last_entry(tables: ClusterTables) -> None:
    batch = EngineBatch(tables, 0)
    batch.n_decoding = MAX_BATCH_TABLE + 50
    assert batch.step_s() == tables.decode_lin[0, -1]


@dataclass
class Eng:
    name: str
    tp: float
    last_used: float


def test_eviction_takes_least_recently_used_until_enough_is_free() -> None:
    idle = [Eng("a", 2, 5.0), Eng("b", 1, 1.0), Eng("c", 1, 3.0)]
    assert lru_evictions(4, 2, idle) == []
    victims = lru_evictions(0, 2, idle)
    assert victims is not None and [e.name for e in victims] == ["b", "c"]
    victims = lru_evictions(1, 4, idle)
    assert victims is not None and [e.name for e in victims] == ["b", "c", "a"]


def test_eviction_keeps_everything_when_it_cannot_make_room() -> None:
    assert lru_evictions(1, 5, [Eng("a", 2, 0.0), Eng("b", 1, 1.0)]) is None
