"""The gateway in front of a real inference engine, not the project's emulation.

A tiny randomly initialised Llama (2 layers, hidden size 32) and a byte-level BPE
tokenizer trained on a few sentences are written to a temporary folder (nothing is
downloaded), served by ``transformers serve`` (the OpenAI-compatible server shipped with
transformers, on CPU) and placed behind ``scalesched serve``. Every answer is checked
against the same model's greedy ``generate`` run in the test: the text, the prompt tokens
(the tokenizer's chat template) and the completion tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SRC, free_port

pytest.importorskip("transformers")
for _module in ("fastapi", "uvicorn", "openai"):  # what `transformers serve` needs
    pytest.importorskip(_module)

TRAINING_TEXT = [
    "the planner writes a plan and the coder writes the code",
    "the reviewer reads the code and answers with a short review",
    "hello world, this is a tiny model for a gateway test",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
DEADLINE_S = 90.0  # for a process to come up; every wait below is bounded


def build_tiny_model(folder: Path) -> None:
    """A 2-layer Llama with random weights and its tokenizer, saved as a local model.

    The tokenizer's alphabet is the training text's bytes only (ASCII), so whatever the
    random model generates decodes to plain text, whole at every token."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    raw.train_from_iterator(
        TRAINING_TEXT, trainer=trainers.BpeTrainer(vocab_size=120, special_tokens=specials)
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    tokenizer.pad_token = "<pad>"
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    return urllib.request.urlopen(request, timeout=60)


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args!r} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if _get(url)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} not healthy after {DEADLINE_S} s: {log.read_text()[-2000:]}")


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Interrupt (a clean shutdown), then kill what is still there after 15 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class Stack:
    """A real engine and a gateway in front of it, and the model to check answers with."""

    def __init__(self, model_dir: Path, engine_url: str, gateway_url: str) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.served = str(model_dir)  # `transformers serve` names a local model by its path
        self.engine_url, self.gateway_url = engine_url, gateway_url
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    def greedy(self, prompt_ids: list[int], max_tokens: int) -> tuple[str, int]:
        """What the engine must answer: the greedy continuation's text and token count."""
        import torch

        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([prompt_ids]),
                attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                max_new_tokens=max_tokens,
                do_sample=False,
            )
        new = out[0, len(prompt_ids) :].tolist()
        return self.tokenizer.decode(new, skip_special_tokens=True), len(new)

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        return list(ids)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("real-engine")
    model_dir = root / "tiny-llama"
    build_tiny_model(model_dir)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": SRC}
    engine_port, gateway_port = free_port(), free_port()
    engine_args = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir)]
    engine_args += ["--host", "127.0.0.1", "--port", str(engine_port), "--device", "cpu"]
    engine = _start(engine_args + ["--dtype", "float32"], env, root / "engine.log")
    procs = [engine]
    try:
        (root / "backends.yaml").write_text(
            "backends:\n  - name: hf-cpu-0\n    server_type: l4-24g-x1\n"
            f"    models: {{{json.dumps(str(model_dir))}: phi-2}}\n"
            f"    endpoint: {{base_url: 'http://127.0.0.1:{engine_port}/v1', timeout_s: 60}}\n"
        )
        gateway_args = [sys.executable, "-m", "scalesched", "serve", "--backends"]
        gateway_args += [str(root / "backends.yaml"), "--port", str(gateway_port)]
        gateway = _start(gateway_args + ["--scrape-s", "0.5"], env, root / "gateway.log")
        procs.append(gateway)
        _wait_healthy(engine, f"http://127.0.0.1:{engine_port}/health", root / "engine.log")
        _wait_healthy(gateway, f"http://127.0.0.1:{gateway_port}/health", root / "gateway.log")
        s = Stack(model_dir, f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{gateway_port}")
        yield s
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _stream_events(response: Any) -> list[dict[str, Any]]:
    """The JSON events of a server-sent stream up to ``[DONE]`` (bounded by the stream)."""
    events: list[dict[str, Any]] = []
    for line in response:
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[len(b"data:") :].strip()
        if data == b"[DONE]":
            break
        events.append(json.loads(data))
    return events


CONVERSATIONS = [
    ([{"role": "user", "content": "hello world"}], 6),
    (
        [
            {"role": "system", "content": "you are the planner"},
            {"role": "user", "content": "write a plan for the coder"},
        ],
        9,
    ),
]


def test_chat_through_the_gateway_is_the_models_greedy_answer(stack: Stack) -> None:
    for i, (messages, max_tokens) in enumerate(CONVERSATIONS):
        body = {"model": stack.served, "messages": messages, "max_tokens": max_tokens}
        body["temperature"] = 0
        with _post(
            stack.gateway_url + "/v1/chat/completions", body, {"x-workflow-id": f"wf-{i}"}
        ) as r:
            assert r.status == 200
            answer = json.loads(r.read())
        prompt = stack.chat_ids(messages)
        text, n_new = stack.greedy(prompt, max_tokens)
        assert answer["model"] == stack.served
        assert text and answer["choices"][0]["message"]["content"] == text  # real tokens
        assert answer["usage"]["prompt_tokens"] == len(prompt)
        assert answer["usage"]["completion_tokens"] == n_new > 0


def test_streamed_chat_and_completions_through_the_gateway(stack: Stack) -> None:
    messages, max_tokens = CONVERSATIONS[1]
    body = {"model": stack.served, "messages": messages, "max_tokens": max_tokens}
    body.update(temperature=0, stream=True, stream_options={"include_usage": True})
    with _post(stack.gateway_url + "/v1/chat/completions", body) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        events = _stream_events(r)
    prompt = stack.chat_ids(messages)
    text, n_new = stack.greedy(prompt, max_tokens)
    # OpenAI's stream sends usage only when asked (transformers 5.25 follows it), in a last
    # event with no choices.
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    streamed = "".join(d.get("content") or "" for d in deltas)
    assert streamed == text and len(events) > 2  # a role event, content, the last one
    usage = [e["usage"] for e in events if e.get("usage")]
    assert usage and usage[-1]["completion_tokens"] == n_new
    assert usage[-1]["prompt_tokens"] == len(prompt)

    prompt_text = "the coder writes"
    body = {"model": stack.served, "prompt": prompt_text, "max_tokens": 5, "temperature": 0}
    with _post(stack.gateway_url + "/v1/completions", body) as r:
        answer = json.loads(r.read())
    ids = stack.tokenizer(prompt_text)["input_ids"]
    text, n_new = stack.greedy(ids, 5)
    assert answer["choices"][0]["text"] == text
    assert answer["usage"]["prompt_tokens"] == len(ids)
    assert answer["usage"]["completion_tokens"] == n_new


def _counter(stack: Stack, name: str, *labels: str) -> float:
    """A counter of the gateway's ``/metrics`` (0 before its first increment)."""
    status, raw = _get(stack.gateway_url + "/metrics")
    assert status == 200
    for line in raw.decode().splitlines():
        if line.startswith(name + "{") and all(label in line for label in labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_models_and_metrics_show_the_real_engine(stack: Stack) -> None:
    status, raw = _get(stack.gateway_url + "/v1/models")
    assert status == 200
    assert [m["id"] for m in json.loads(raw)["data"]] == [stack.served]
    ok = ("scalesched_gateway_requests_total", 'backend="hf-cpu-0"', 'outcome="ok"')
    decided = ("scalesched_gateway_decisions_total", 'policy="eft"')
    before = _counter(stack, *ok), _counter(stack, *decided)
    for stream in (False, True):
        body = {"model": stack.served, "messages": CONVERSATIONS[0][0], "max_tokens": 3}
        with _post(stack.gateway_url + "/v1/chat/completions", {**body, "stream": stream}) as r:
            assert r.status == 200
            r.read()
    assert _counter(stack, *ok) == before[0] + 2
    assert _counter(stack, *decided) == before[1] + 2
    status, raw = _get(stack.gateway_url + "/metrics")
    assert 'scalesched_gateway_backend_healthy{backend="hf-cpu-0"} 1.0' in raw.decode()
