"""The numpy predictor: agrees with its torch twin, saves and loads, rejects bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.predict.features import DURATION_INPUTS, STATIC_GROUPS, TASK_INPUTS
from scalesched.predict.model import QUANTILES, Head, QuantilePredictor, load, save


def torch_net(inputs: int, seed: int):  # type: ignore[no-untyped-def]
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(inputs, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, len(QUANTILES)),
    )


def random_predictor(seed: int = 0) -> QuantilePredictor:
    from scalesched.predict.train import export_head

    rng = np.random.default_rng(seed)

    def head(inputs: int, s: int) -> Head:
        return export_head(
            torch_net(inputs, s), rng.normal(size=inputs), rng.uniform(0.5, 2, inputs)
        )

    return QuantilePredictor(
        tokens=head(TASK_INPUTS, seed),
        duration=head(DURATION_INPUTS, seed + 1),
        finish=head(DURATION_INPUTS, seed + 2),
        static_tokens=np.sort(rng.normal(size=(STATIC_GROUPS, len(QUANTILES))), axis=1),
        static_duration=np.sort(rng.normal(size=(STATIC_GROUPS, len(QUANTILES))), axis=1),
        static_finish=np.sort(rng.normal(size=(STATIC_GROUPS, len(QUANTILES))), axis=1),
        meta={"trace_seeds": [1]},
    )


def test_numpy_head_matches_torch() -> None:
    import torch

    from scalesched.predict.train import export_head, monotone_torch

    net = torch_net(TASK_INPUTS, 3)
    rng = np.random.default_rng(1)
    mean, std = rng.normal(size=TASK_INPUTS), rng.uniform(0.5, 2.0, TASK_INPUTS)
    x = rng.normal(size=(64, TASK_INPUTS)) * 3
    with torch.no_grad():
        expect = monotone_torch(net(torch.tensor((x - mean) / std, dtype=torch.float32)))
    got = export_head(net, mean, std)(x)
    np.testing.assert_allclose(got, expect.numpy(), rtol=1e-4, atol=1e-4)


def test_quantiles_are_increasing() -> None:
    p = random_predictor()
    x = np.random.default_rng(2).normal(size=(200, DURATION_INPUTS)) * 5
    q = p.duration_quantiles(x, np.zeros(200))
    assert (np.diff(q, axis=1) > 0).all()


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    p = random_predictor()
    save(p, tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    x = np.random.default_rng(3).normal(size=(10, DURATION_INPUTS))
    np.testing.assert_allclose(back.duration(x), p.duration(x), rtol=1e-6)
    assert back.meta["trace_seeds"] == [1]


def test_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such predictor file"):
        load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a predictor"):
        load(junk)
    p = random_predictor()
    save(p, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as data:
        arrays = {k: data[k] for k in data.files}
    arrays["duration.w1"] = arrays["duration.w1"][:3]
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=r"bad.npz: duration.w1"):
        load(tmp_path / "bad.npz")
    arrays = {k: v for k, v in arrays.items() if k != "meta"}
    np.savez(tmp_path / "nometa.npz", **arrays)
    with pytest.raises(InputError, match="meta"):
        load(tmp_path / "nometa.npz")


def test_shipped_predictor_loads() -> None:
    from scalesched.predict import default_predictor

    p = default_predictor()
    assert p.meta["script"] == "scripts/derive/fit_default_predictor.py"
    assert set(p.meta["trace_seeds"]).isdisjoint({0, 1, 2, 9001})


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("duration.w0", "text", "duration.w0: must be an array of real numbers"),
        ("tokens.b0", np.array([b"x"] * 4), "tokens.b0: must be an array of real numbers"),
        ("finish.x_std", np.ones(DURATION_INPUTS, dtype=complex), "finish.x_std: must be"),
        ("static_tokens", np.full((STATIC_GROUPS, len(QUANTILES)), "1"), "static_tokens: must"),
        ("static_duration", np.ones((2, 2)), "static_duration: need a finite"),
        ("meta", '{"format": "x"}', "meta.format"),
        ("meta", "[", "meta: not valid JSON"),
    ],
)
def test_wrong_types_in_a_predictor_file_are_one_line(
    tmp_path: Path, key: str, value: object, field: str
) -> None:
    save(random_predictor(), tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as data:
        arrays = {k: data[k] for k in data.files}
    arrays[key] = np.asarray(value)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=rf"bad\.npz: {field}") as info:
        load(tmp_path / "bad.npz")
    assert "\n" not in str(info.value)


def test_quantiles_of_the_wrong_type_are_one_line(tmp_path: Path) -> None:
    import json

    save(random_predictor(), tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["meta"]))
    arrays["meta"] = np.array(json.dumps({**meta, "quantiles": 7}))
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=r"bad\.npz: meta\.version"):
        load(tmp_path / "bad.npz")
