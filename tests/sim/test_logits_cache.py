"""The logits cache (``--logits-cache``): branches ride a running sibling or take stored
rows, decode only what follows, charge the rows to KV memory and free them with the group;
measuring alone changes nothing."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sim_builders import llm, workflow

from scalesched.cluster import engine_perf, get_cluster
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.kernel.llm_engine import EngineBatch
from scalesched.kernel.metrics import LogitsRecord
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.logits_cache import LogitsCache, logits_row_tokens
from scalesched.sim.run import _drive, simulate
from scalesched.sim.scenario import Scenario, build_jobs
from scalesched.workload.instance import Job, TaskInstance

PROMPT = 600
OUT = [200, 150, 300, 100]
REPLAY = [0, 50, 100, 20]


def _one_gpu() -> ClusterSpec:
    return ClusterSpec("one", (ServerSpec("g0", "custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0),))


def _branch(i: int) -> TaskInstance:
    t = llm(f"b#{i}", prompt=PROMPT, out=OUT[i])
    return dataclasses.replace(t, context_of=0, resample_of=1, replay_tokens=REPLAY[i])


def _group_job(chained: bool) -> Job:
    """pose -> four branches continuing its context (in parallel, or one after another)."""
    tasks = [llm("pose", prompt=PROMPT - 20, out=12)] + [_branch(i) for i in range(4)]
    if chained:
        edges = {(0, 1): 0.0, (1, 2): 0.0, (2, 3): 0.0, (3, 4): 0.0}
    else:
        edges = {(0, i): 0.0 for i in range(1, 5)}
    return Job(0, 0.0, workflow(tasks, edges))


def _run(job: Job, logits: bool | None) -> Simulation:
    sim = Simulation(_one_gpu(), [job], record_trace=True, logits_cache=logits)
    _drive(sim, get_policy("eft"), 0, 0.0)
    assert sim.done
    return sim


def _record(sim: Simulation) -> LogitsRecord:
    record = sim.run_record(
        policy="eft", cluster="one", makespan_s=1.0, utilisation=(sim.tables.zeros,) * 2, wall_s=0
    ).logits
    assert record is not None
    return record


def _finish(sim: Simulation) -> dict[str, float]:
    return {r.task: r.end for r in sim.trace}


def test_parallel_branches_ride_the_first_path() -> None:
    """Branches admitted with the first path follow it up to their divergence point: they
    decode only their own tails, and the smaller batch makes every step faster."""
    on, measured = _run(_group_job(False), True), _run(_group_job(False), False)
    rec = _record(on)
    reused = dict(zip(rec.output_tokens.tolist(), rec.reused_tokens.tolist(), strict=True))
    assert reused == {OUT[i]: REPLAY[i] for i in range(4)}
    assert _record(measured).reused_tokens.sum() == 0
    end_on, end_off = _finish(on), _finish(measured)
    for i in range(4):
        assert end_on[f"b#{i}"] < end_off[f"b#{i}"]
    assert end_on["pose"] == end_off["pose"]


def _step_s(batch: int, ctx: int) -> float:
    tables = Simulation(_one_gpu(), [_group_job(True)]).tables
    eng = EngineBatch(tables, int(tables.engine_class[0, MODEL_INDEX["llama-2-7b"]]))
    eng.n_decoding, eng.ctx_sum = batch, ctx
    return eng.step_s()


def test_a_later_branch_takes_stored_rows_into_its_prefill() -> None:
    """Run one after another, each later branch takes its repeated tokens from the rows the
    first path left: its prefill grows by those tokens, its decode shrinks by them."""
    on, measured = _run(_group_job(True), True), _run(_group_job(True), False)
    perf = engine_perf("llama-2-7b", "A100-80G", 1)
    recs = {r.task: r for r in on.trace}
    recs_off = {r.task: r for r in measured.trace}
    for i in (1, 2, 3):
        r, off = recs[f"b#{i}"], recs_off[f"b#{i}"]
        step = _step_s(1, PROMPT + OUT[i] // 2)
        expect = perf.prefill_s(PROMPT + REPLAY[i]) + (OUT[i] - REPLAY[i]) * step
        assert r.end - r.start == pytest.approx(expect, rel=1e-9)
        plain = perf.prefill_s(PROMPT) + OUT[i] * step
        assert off.end - off.start == pytest.approx(plain, rel=1e-9)
    rec = _record(on)
    assert rec.reused_tokens.tolist() == REPLAY
    # the first path's 199 rows, charged at a fp16 vocabulary row each, freed at the end
    assert rec.peak_tokens == int(np.ceil((OUT[0] - 1) * logits_row_tokens("llama-2-7b")))
    assert all(e.kv_used == 0 for engines in on._engines for e in engines.values())


def test_rows_need_free_memory_and_go_with_their_group() -> None:
    cache, engine = LogitsCache(), object()
    key = (0, 1)
    for gid, index in ((10, 1), (11, 2)):
        cache.admit(gid, key, 2, index, 100, 40 if index == 2 else 0, engine, 0.0, 0.0)
    assert cache.start_decoding(10, engine, 0.0) == (100, None)
    assert cache.start_decoding(11, engine, 0.0) == (60, 40.0)  # rides the first path
    assert cache.finished(10, engine, 0.5, lambda tokens: False, 1.0) == []
    assert cache.dropped == 1 and cache.peak == 0  # no room: the first path's rows are lost
    # the rider still ended its ride; the group's last branch frees nothing (nothing stored)
    assert cache.finished(11, engine, 0.5, lambda tokens: True, 2.0) == [
        (engine, 20),
        (engine, -20),
    ]
    assert cache.peak == 20 and cache.charged == 0
    assert logits_row_tokens("no-such-model") == 0.0


def _tts_jobs(spec: ClusterSpec, rate: float, seed: int) -> list[Job]:
    scenario = Scenario(workload="test-time-scaling", workflows=40, rate=rate, seed=seed)
    return build_jobs(ClusterTables(spec), scenario)


def test_measuring_changes_nothing() -> None:
    spec = get_cluster("hetero-16")
    jobs = _tts_jobs(spec, rate=2.0, seed=3)
    plain = simulate(spec, jobs, get_policy("eft"), seed=3)
    measured = simulate(spec, jobs, get_policy("eft"), seed=3, logits_cache=False)
    assert np.array_equal(plain.response_times, measured.response_times)
    assert int(measured.metrics["branch_calls"]) > 0
    assert measured.metrics["branch_reused_frac"] == 0.0
    assert "branch_calls" not in plain.metrics


@pytest.mark.parametrize("policy", ["eft", "cache_aware", "hedge", "random"])
def test_runs_finish_and_give_memory_back(policy: str) -> None:
    spec = get_cluster("hetero-16")
    jobs = _tts_jobs(spec, rate=3.0, seed=5)
    sim = Simulation(spec, jobs, logits_cache=True)
    _drive(sim, get_policy(policy), 5, 0.0)
    assert sim.done
    assert all(e.kv_used == 0 and not e.marks for engines in sim._engines for e in engines.values())
    again = simulate(spec, jobs, get_policy(policy), seed=5, logits_cache=True)
    first = simulate(spec, jobs, get_policy(policy), seed=5, logits_cache=True)
    assert np.array_equal(again.response_times, first.response_times)
    assert again.metrics["branch_reused_frac"] == first.metrics["branch_reused_frac"]
