"""Loading a checkpoint: every way a file can be wrong is one InputError naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
from scalesched.errors import InputError
from scalesched.nn import build_network
from scalesched.nn.checkpoint import save_checkpoint
from scalesched.nn.scheduler import load_scheduler
from scalesched.policies import get_policy

torch.set_num_threads(1)


def payload(**changes: Any) -> dict[str, Any]:
    cfg = {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES, "d_model": 16, "n_heads": 2}
    net = build_network("scale", **cfg)
    data: dict[str, Any] = {
        "network": "scale",
        "network_config": cfg,
        "state_dict": net.state_dict(),
        "metadata": {"name": "scale"},
    }
    data.update(changes)
    return data


def save(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "c.pt"
    save_checkpoint(path, data)
    return path


def test_a_good_checkpoint_loads_and_is_named_by_its_path(tmp_path: Path) -> None:
    path = save(tmp_path, payload())
    scheduler = load_scheduler(path)
    # metadata.name says "scale", but this is not the shipped policy of that name
    assert scheduler.name == str(path)
    assert get_policy(str(path)).name == str(path)
    assert get_policy("scale").name == "scale"  # the shipped one keeps its name


def test_wrong_shape_names_the_tensor(tmp_path: Path) -> None:
    state = payload()["state_dict"]
    key = next(k for k, v in state.items() if v.dim() == 2)
    state[key] = torch.zeros(3, 5)
    path = save(tmp_path, payload(state_dict=state))
    with pytest.raises(InputError, match=rf"c\.pt: state_dict\.{key}: has shape \(3, 5\)"):
        load_scheduler(path)


def test_missing_and_unexpected_weights(tmp_path: Path) -> None:
    state = payload()["state_dict"]
    key = next(iter(state))
    del state[key]
    with pytest.raises(InputError, match=rf"state_dict\.{key}: missing"):
        load_scheduler(save(tmp_path, payload(state_dict=state)))
    state = payload()["state_dict"]
    state["extra.weight"] = torch.zeros(1)
    with pytest.raises(InputError, match=r"state_dict\.extra\.weight: not a weight"):
        load_scheduler(save(tmp_path, payload(state_dict=state)))


def test_unknown_network_kind(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"network: unknown network kind 'lstm'"):
        load_scheduler(save(tmp_path, payload(network="lstm")))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights(tmp_path: Path, bad: float) -> None:
    state = payload()["state_dict"]
    key = next(k for k, v in state.items() if v.is_floating_point())
    state[key] = state[key].clone()
    state[key].view(-1)[0] = bad
    with pytest.raises(InputError, match=rf"state_dict\.{key}: holds NaN or infinite"):
        load_scheduler(save(tmp_path, payload(state_dict=state)))


def test_config_that_does_not_build_or_does_not_fit_the_features(tmp_path: Path) -> None:
    cfg = dict(payload()["network_config"], n_heads=3)  # 16 is not a multiple of 3
    with pytest.raises(InputError, match=r"network_config: d_model"):
        load_scheduler(save(tmp_path, payload(network_config=cfg)))
    cfg = dict(payload()["network_config"], task_dim=TASK_FEATURES + 1)
    with pytest.raises(InputError, match=r"network_config\.task_dim"):
        load_scheduler(save(tmp_path, payload(network_config=cfg)))
    cfg = dict(payload()["network_config"], d_model=1 << 30, n_heads=1)  # never allocated
    with pytest.raises(InputError, match=r"network_config\.d_model: must be an integer in"):
        load_scheduler(save(tmp_path, payload(network_config=cfg)))
    cfg = dict(payload()["network_config"], colour="red")
    with pytest.raises(InputError, match=r"network_config"):
        load_scheduler(save(tmp_path, payload(network_config=cfg)))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_heads": 10**6}, r"network_config\.n_heads: must be an integer in \[1, 256\]"),
        ({"d_model": 16.0}, r"network_config\.d_model: must be an integer"),
        ({"critic_hidden": True}, r"network_config\.critic_hidden: must be an integer"),
        ({"heuristic_prior": float("nan")}, r"network_config\.heuristic_prior: must be a finite"),
        ({"heuristic_prior": 1e300}, r"network_config\.heuristic_prior: must be within"),
        ({"d_model": 4096, "n_heads": 1, "critic_hidden": 65_536}, r"network_config: describes"),
    ],
)
def test_config_ranges_are_checked_before_any_allocation(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    cfg = dict(payload()["network_config"], **change)
    with pytest.raises(InputError, match=field) as info:
        load_scheduler(save(tmp_path, payload(network_config=cfg)))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("scale", [1e30, 1e18])
def test_huge_but_finite_weights_are_refused_by_their_scores(tmp_path: Path, scale: float) -> None:
    state = {
        k: v * scale if v.is_floating_point() else v for k, v in payload()["state_dict"].items()
    }
    assert all(bool(torch.isfinite(v).all()) for v in state.values())  # every weight finite
    path = save(tmp_path, payload(state_dict=state))
    with pytest.raises(
        InputError, match=r"c\.pt: state_dict: the weights give .* on a probe input"
    ):
        load_scheduler(path)


def test_an_unknown_observed_length_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = save(tmp_path, payload(observed_tokens="p50"))
    with pytest.raises(InputError, match=r"c\.pt: observed_tokens: is 'p50'; known: estimate, p90"):
        load_scheduler(path)
    assert load_scheduler(save(tmp_path, payload(observed_tokens="p90"))).observed_tokens == "p90"
    assert load_scheduler(save(tmp_path, payload())).observed_tokens == "estimate"
