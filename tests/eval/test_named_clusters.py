"""`eval --clusters`: studies on named clusters (presets or YAML files) instead of hetero-N."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalesched.errors import InputError
from scalesched.eval.study import StudyConfig, named_clusters, run_specs

ROOT = Path(__file__).resolve().parents[2]
A100_LAB = str(ROOT / "configs" / "clusters" / "a100-lab.yaml")


def test_named_clusters_are_keyed_by_size() -> None:
    sizes, names = named_clusters([A100_LAB, "hetero-8"])
    assert sizes == (16, 8)
    cfg = StudyConfig(policies=("eft",), nodes=sizes, seeds=(0,), clusters=names)
    assert {spec.cluster for spec in run_specs(cfg)} == {A100_LAB, "hetero-8"}
    assert cfg.cluster_for(16) == A100_LAB


def test_two_clusters_of_one_size_are_refused() -> None:
    with pytest.raises(InputError, match="one cluster per size"):
        named_clusters(["hetero-16", A100_LAB])


def test_without_names_the_family_preset_is_used() -> None:
    cfg = StudyConfig(policies=("eft",), nodes=(8,), seeds=(0,))
    assert [spec.cluster for spec in run_specs(cfg)] == ["hetero-8"]
