"""EnvSched's sampler: priorities from the learning signal, a cold-start prior over the
similarity graph, and per-batch diversity."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from scalesched.train.envsched import (
    EnvSchedSampler,
    EnvSetting,
    UniformSampler,
    default_settings,
    similarity_matrix,
)

SETTINGS = default_settings()


def test_settings_span_patterns_loads_mixes_and_warmups_on_16_servers() -> None:
    assert len(SETTINGS) == 7 * 3 * 4 * 2
    for mix in {s.mix for s in SETTINGS}:
        one = next(s for s in SETTINGS if s.mix == mix)
        assert len(one.cluster().servers) == 16


def test_without_signal_every_setting_weighs_the_same() -> None:
    w = EnvSchedSampler(SETTINGS, seed=0).weights()
    assert np.allclose(w, w[0])


def test_high_signal_settings_are_drawn_more_often() -> None:
    sampler = EnvSchedSampler(SETTINGS, seed=3)
    for i, s in enumerate(SETTINGS):
        sampler.update(i, 1.0 if s.load == 0.9 else 0.1)
    loads = Counter(SETTINGS[i].load for _ in range(30) for i in sampler.sample(16))
    assert loads[0.9] > 2 * loads[0.5] and loads[0.9] > 2 * loads[0.7]
    assert loads[0.5] > 0  # staleness and the batch penalty keep the rest in play


def test_unseen_settings_inherit_from_similar_seen_ones() -> None:
    sampler = EnvSchedSampler(SETTINGS, seed=0)
    hot = [i for i, s in enumerate(SETTINGS) if s.workload == "debate" and s.load == 0.9]
    cold = [i for i, s in enumerate(SETTINGS) if s.workload == "react" and s.load == 0.5]
    for i in hot[1:]:
        sampler.update(i, 5.0)
    for i in cold[1:]:
        sampler.update(i, 0.1)
    prior = sampler.scores_with_prior()
    assert math.isnan(sampler.score[hot[0]]) and math.isnan(sampler.score[cold[0]])
    assert prior[hot[0]] > 2 * prior[cold[0]]


def test_a_batch_respects_the_pattern_quota_and_rarely_repeats() -> None:
    sampler = EnvSchedSampler(SETTINGS, seed=5, max_share=0.25)
    for i, s in enumerate(SETTINGS):
        sampler.update(i, 10.0 if s.workload == "codegen" else 0.01)
    for _ in range(10):
        batch = sampler.sample(16)
        per_pattern = Counter(SETTINGS[i].workload for i in batch)
        assert max(per_pattern.values()) <= 4
        assert len(set(batch)) >= 14


def test_same_seed_same_draws() -> None:
    a, b = EnvSchedSampler(SETTINGS, seed=9), EnvSchedSampler(SETTINGS, seed=9)
    assert [a.sample(8) for _ in range(3)] == [b.sample(8) for _ in range(3)]
    u, v = UniformSampler(SETTINGS, seed=9), UniformSampler(SETTINGS, seed=9)
    assert u.sample(8) == v.sample(8)


def test_similarity_is_symmetric_and_local() -> None:
    few = [EnvSetting("react", load, "balanced", 50) for load in (0.5, 0.7, 0.9)]
    w = similarity_matrix(few, k=1)
    assert np.allclose(w, w.T) and np.all(np.diag(w) == 0)
    assert w[0, 1] > w[0, 2]
