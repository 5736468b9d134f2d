"""Mutated checkpoints through ``simulate --policy FILE``: weights of the wrong shape or
dtype, NaN and infinities, deleted or extra entries, wrong network settings and kinds."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from fuzzing import HOSTILE, check_cli, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
from scalesched.nn import build_network
from scalesched.nn.checkpoint import FORMAT

torch.set_num_threads(1)
CFG = {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES, "d_model": 8, "n_heads": 2}
STATE = build_network("scale", **CFG).state_dict()
RUN = ["--cluster", "hetero-4", "--workflows", "3", "--rate", "0.5", "--json"]


@st.composite
def checkpoint(draw: st.DrawFn) -> dict[str, Any]:
    state = {k: v.clone() for k, v in STATE.items()}
    cfg: dict[str, Any] = dict(CFG)
    payload: dict[str, Any] = {"format": FORMAT, "network": "scale"}
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(state)))
        action = draw(
            st.sampled_from(["shape", "nan", "inf", "dtype", "drop", "extra", "cfg", "kind"])
        )
        if action == "shape" and key in state:
            dims = draw(st.lists(st.integers(0, 40), min_size=0, max_size=3))
            state[key] = torch.zeros(tuple(dims))
        elif action in ("nan", "inf") and key in state and state[key].is_floating_point():
            if state[key].numel():
                state[key].view(-1)[0] = float(action)
        elif action == "dtype" and key in state:
            state[key] = state[key].to(torch.int64)
        elif action == "drop":
            state.pop(key, None)
        elif action == "extra":
            state[f"x.{draw(st.text(max_size=4))}"] = torch.zeros(2)
        elif action == "cfg":
            cfg[draw(st.sampled_from([*CFG, "colour"]))] = draw(HOSTILE)
        else:
            payload["network"] = draw(st.one_of(HOSTILE, st.sampled_from(["mlp16", "lstm"])))
    return {**payload, "network_config": cfg, "state_dict": state}


@given(data=checkpoint())
@fuzz_settings(share=0.5)
def test_mutated_checkpoints(data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.pt"
        torch.save(data, path)
        check_cli("simulate", "--policy", str(path), *RUN)
