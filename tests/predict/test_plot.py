"""Calibration plots: ``predict eval --plot`` writes the image, its table is in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.predict.model import QUANTILES
from scalesched.predict.plot import plot_calibration

PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_writes_an_image(tmp_path: Path) -> None:
    table = {"levels": list(QUANTILES), "model": list(QUANTILES), "static_role": [0.5] * 9}
    heads = {"tokens": {"calibration": table, "samples": {"n": 10.0}}}
    out = tmp_path / "c.png"
    plot_calibration(heads, out, title="t")
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 5000
    with pytest.raises(ValueError, match="no head"):
        plot_calibration({}, tmp_path / "d.png", title="t")


def test_cli_eval_plot(tmp_path: Path) -> None:
    from scalesched.cli import app

    out = tmp_path / "cal.png"
    args = ["--cluster", "hetero-4", "--workflows", "40", "--seed", "8", "--plot", str(out)]
    r = CliRunner().invoke(app, ["predict", "eval", *args, "--json"])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == PNG
    heads = json.loads(r.stdout)["heads"]
    assert set(heads) == {"duration", "finish", "tokens"}
    for rows in heads.values():
        table = rows["calibration"]
        assert table["levels"] == list(QUANTILES)
        observed = np.array(table["model"])
        assert (np.diff(observed) >= 0).all() and observed[0] >= 0 and observed[-1] <= 1
        # the table and the scores count the same truths: the 90% interval's coverage is
        # the share below q0.95 less the share below q0.05 (up to truths on q0.05 itself)
        cov90 = observed[QUANTILES.index(0.95)] - observed[QUANTILES.index(0.05)]
        assert abs(cov90 - rows["model"]["coverage_90"]) < 0.01


@pytest.mark.parametrize(
    ("name", "needle"), [("cal.xyz", "unknown image type"), ("no/such/cal.png", "does not exist")]
)
def test_cli_eval_bad_plot_is_one_line(tmp_path: Path, name: str, needle: str) -> None:
    from scalesched.cli import app

    r = CliRunner().invoke(app, ["predict", "eval", "--plot", str(tmp_path / name)])
    assert r.exit_code == 2, r.output
    assert needle in r.output and "--plot" in r.output
    assert len(r.output.strip().splitlines()) == 1
