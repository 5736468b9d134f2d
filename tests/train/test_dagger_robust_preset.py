"""The recommended policy's recipe trains and selects exactly on the robustness suite's
training and selection settings, so no evaluation setting is ever trained or selected on."""

from __future__ import annotations

from pathlib import Path

import pytest

import scalesched
from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.eval.suite import SuiteSetting, load_suite, mix_of
from scalesched.train.dagger import Setting, load_config, settings_of, validation_settings

PRESETS = Path(scalesched.__file__).parent / "train" / "presets"


def _key(cluster: ClusterSpec, x: Setting | SuiteSetting) -> str:
    world = x.world if isinstance(x, SuiteSetting) else x.residency
    return str(
        (sorted(mix_of(cluster)), len(cluster.servers), x.workload, x.arrivals, x.load, world)
    )


@pytest.mark.parametrize(
    "preset", ["dagger-robust-n16", "dagger-robust-order-n16", "dagger-robust-order-rollout-n16"]
)
def test_the_preset_holds_the_suites_training_and_selection_settings(preset: str) -> None:
    suite = load_suite("robustness")
    cfg = load_config(PRESETS / f"{preset}.yaml")
    for mine, theirs in ((settings_of(cfg), "training"), (validation_settings(cfg), "selection")):
        got = sorted(_key(get_cluster(x.cluster), x) for x in mine)
        want = sorted(_key(suite.clusters[x.cluster], x) for x in suite.settings(theirs))
        assert got == want, theirs
    assert cfg.expert in ("best", "order_rollout:forks=2") and cfg.selection_settings
