"""The gateway's backends file: one clear error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalesched.cluster.endpoints import (
    backends_file_schema,
    backends_schema_json,
    load_backends_file,
)
from scalesched.errors import InputError

REPO = Path(__file__).resolve().parents[2]
GOOD = """\
backends:
  - name: h100-0
    server_type: h100-80g-x4
    models: {meta-llama/Llama-2-7b-chat-hf: llama-2-7b, phi: phi-2}
    endpoint: {base_url: "http://127.0.0.1:18000/v1", api_key_env: VLLM_KEY, timeout_s: 30}
  - name: l4-0
    server_type: l4-24g-x1
    models: {phi: phi-2}
    endpoint: {base_url: "http://127.0.0.1:18001/v1"}
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "backends.yaml"
    path.write_text(text)
    return load_backends_file(str(path))


def test_a_good_file_loads_with_the_shared_endpoint_settings(tmp_path):
    backends = _load(tmp_path, GOOD)
    assert [b.name for b in backends] == ["h100-0", "l4-0"]
    assert backends[0].endpoint.timeout_s == 30 and backends[0].endpoint.api_key_env == "VLLM_KEY"
    assert backends[0].models["phi"] == "phi-2"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (("server_type: l4-24g-x1", "server_type: l4-99"), "backends[1].server_type", "unknown"),
        (("server_type: l4-24g-x1", "server_type: cpu-64c"), "backends[1].server_type", "no GPUs"),
        (("{phi: phi-2}\n", "{phi: gpt-9}\n"), "backends[1].models.phi", "unknown catalog"),
        (("{phi: phi-2}\n", "{big: llama-2-70b}\n"), "backends[1].models.big", "does not fit"),
        (("name: l4-0", "name: h100-0"), "backends[1].name", "twice"),
        (("18001", "18000"), "backends[1].endpoint.base_url", "twice"),
        (("timeout_s: 30", "timeout_s: -1"), "backends[0].endpoint.timeout_s", "greater"),
        (("    models: {phi", "    colour: red\n    models: {phi"), "backends[1].colour", "Extra"),
        (("http://127.0.0.1:18001", "ftp://x"), "backends[1].endpoint.base_url", "http"),
    ],
)
def test_each_mistake_is_one_error_naming_file_and_field(tmp_path, change, field, words):
    old, new = change
    assert old in GOOD
    with pytest.raises(InputError) as e:
        _load(tmp_path, GOOD.replace(old, new, 1))
    assert e.value.source.endswith("backends.yaml") and e.value.field == field
    assert words in e.value.message and "\n" not in str(e.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="no such backends file"):
        load_backends_file(str(tmp_path / "absent.yaml"))
    with pytest.raises(InputError) as e:
        _load(tmp_path, "backends: []\n")
    assert e.value.field == "backends"


def test_schema_file_is_current():
    committed = (REPO / "docs" / "backends-schema.json").read_text()
    assert committed == backends_schema_json(), (
        "docs/backends-schema.json is stale: "
        "python -m scalesched.cluster.endpoints > docs/backends-schema.json"
    )
    assert json.loads(committed) == backends_file_schema()
