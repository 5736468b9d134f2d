"""Mutated endpoints files through ``run --llm http --endpoints`` (refused before Ray is
reached: the address is closed and the connect timeout short), and hostile numbers for the
planners' options (``plan``, ``plan shares``, ``memplan``): every one ends in exit 0 or in
one line with exit 2, and a refusal never needs a Ray head, a profile or a solve."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fuzzing import HOSTILE, check_cli, corrupted_text, dump_json, dump_yaml, fuzz_settings, write
from hypothesis import given
from hypothesis import strategies as st

ENTRY = {
    "base_url": "http://{node_ip}:8000/v1",
    "served_model": "m",
    "api": "chat",
    "api_key_env": "KEY",
    "timeout_s": 30,
    "extra": {"ignore_eos": True},
}
KEYS = st.sampled_from([*ENTRY, "timeot_s", "base_uri", "", "0"])
URLS = st.sampled_from(
    ["http://h/v1", "http://{host}/v1", "http://{node_ip", "ftp://h", "http://", "x", "{}"]
)


@st.composite
def endpoints_file(draw: st.DrawFn) -> tuple[bytes, str]:
    doc: dict[Any, Any] = {}
    for model in draw(st.lists(st.sampled_from(["llama-2-7b", "phi-2", "gpt-9", 7]), max_size=3)):
        entry: Any = dict(ENTRY)
        for _ in range(draw(st.integers(0, 3))):
            key = draw(KEYS)
            entry[key] = draw(st.one_of(HOSTILE, URLS))
        if draw(st.integers(0, 9)) == 0:
            entry = draw(HOSTILE)
        doc[model] = entry
    suffix = draw(st.sampled_from([".yaml", ".json"]))
    text = dump_json(doc) if suffix == ".json" else dump_yaml(doc)
    return draw(corrupted_text(text)), suffix


@given(data=endpoints_file())
@fuzz_settings(share=0.5)
def test_mutated_endpoints_files(data: tuple[bytes, str]) -> None:
    raw, suffix = data
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), f"ep{suffix}", raw)
        code, _ = check_cli(
            "run", "--address", "127.0.0.1:1", "--connect-timeout", "0.5",
            "--llm", "http", "--endpoints", str(path),
            "--workflows", "2", "--rate", "1", "--cluster", "hetero-4",
        )  # fmt: skip
        assert code == 2  # no Ray head answers: every path ends in a refusal


NUMBER_TEXT = st.one_of(
    st.floats().map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e308", "-0.0", "0", "1e-320", "x", ""]),
)


@given(
    option=st.sampled_from(["--rate", "--slo-p95", "--seed", "--samples"]),
    value=NUMBER_TEXT,
)
@fuzz_settings(share=0.5)
def test_plan_numbers(option: str, value: str) -> None:
    # one companion option out of range, so an in-range value never starts a profile
    companion = ["--samples", "0"] if option == "--rate" else ["--rate", "nan"]
    code, _ = check_cli("plan", *companion, option, value, "--json")
    assert code == 2


@given(
    option=st.sampled_from(["--time-limit", "--pcie-gbs", "--cpu-mem-gb", "--batch", "--seq"]),
    value=NUMBER_TEXT,
)
@fuzz_settings(share=0.5)
def test_memplan_numbers(option: str, value: str) -> None:
    # --model is missing on purpose when the value is in range: no solve is started
    check_cli("memplan", "--gpu", "l4", option, value, "--json")
