"""The load generator: every LLM call of every workflow sent once, after its parents,
with the header convention and max_tokens = the true output length; failures counted. The
command: a wrong URL fails in under 2 s with exit code 2 and one line saying why, a run
with failed workflows exits 1 (unless --allow-failures), --json is strict JSON."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from aiohttp import web
from typer.testing import CliRunner

from scalesched.cli import app as cli_app
from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.errors import InputError
from scalesched.serve.engine import start_site
from scalesched.serve.loadgen import LoadGenerator, check_url
from scalesched.serve.protocol import sse
from scalesched.sim.scenario import Scenario, build_jobs

SCALE = 0.002  # model seconds to wall seconds: tools of seconds wait milliseconds


def _jobs(n: int = 6):
    tables = ClusterTables(get_cluster("hetero-4"))
    return build_jobs(tables, Scenario(workload="agentic-mix", workflows=n, rate=5.0, seed=3))


class Recorder:
    """An OpenAI-ish backend that records each call and answers a short stream."""

    def __init__(self, fail_every: int = 0) -> None:
        self.calls: list[dict] = []
        self.fail_every = fail_every

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.calls.append(
            {
                "wf": request.headers["x-workflow-id"],
                "session": request.headers["x-session-id"],
                "max_tokens": body["max_tokens"],
                "model": body["model"],
                "t": time.perf_counter(),
                "est": request.headers["x-task-output-est"],
                "role": request.headers.get("x-task-role"),
                "hint": float(request.headers["x-task-hint"]),
            }
        )
        if self.fail_every and len(self.calls) % self.fail_every == 0:
            return web.json_response({"error": {"message": "boom"}}, status=500)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse({"choices": [{"index": 0, "delta": {"content": "x"}}]}))
        await response.write(sse("[DONE]"))
        await response.write_eof()
        return response


async def _models(_request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})


def _app(recorder: Recorder) -> web.Application:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", recorder.handle)
    app.router.add_get("/v1/models", _models)
    return app


async def _run(recorder: Recorder, jobs):
    app = _app(recorder)
    runner, port = await start_site(app, "127.0.0.1", 0)
    try:
        gen = LoadGenerator(f"http://127.0.0.1:{port}/v1", jobs, time_scale=SCALE, timeout_s=10)
        return await gen.run_async()
    finally:
        await runner.cleanup()


def test_every_call_sent_once_with_headers_and_true_output_length():
    jobs = _jobs()
    rec = Recorder()
    result = asyncio.run(_run(rec, jobs))
    llm = [(j, t) for j in jobs for t in j.workflow.tasks if t.kind == "llm"]
    assert result.requests == len(llm) == len(rec.calls)
    m = result.metrics()
    assert m["workflows_completed"] == len(jobs) and m["requests_failed"] == 0
    assert m["avg_response_time_s"] > 0 and m["throughput_wps"] > 0 and m["avg_ttft_s"] >= 0
    # the load figures as simulate --json names them, from the jobs' real arrival times
    arrivals = sorted(j.arrival for j in jobs)
    span = arrivals[-1] - arrivals[0]
    assert m["offered_rate_wps"] == pytest.approx((len(jobs) - 1) / span) if span > 0 else True
    assert isinstance(m["steady_state"], bool) and m["mean_in_system"] >= 0
    expected = sorted((f"wf-{j.workflow_id}", t.output_tokens, t.model) for j, t in llm)
    assert sorted((c["wf"], c["max_tokens"], c["model"]) for c in rec.calls) == expected
    assert all(c["session"].startswith(c["wf"] + "/") for c in rec.calls)
    # The signals a simulated scheduler sees, never the truth: the estimate, role, hint.
    signals = sorted((f"wf-{j.workflow_id}", str(t.output_tokens_est), t.role) for j, t in llm)
    assert sorted((c["wf"], c["est"], c["role"]) for c in rec.calls) == signals
    assert any(str(t.output_tokens) != str(t.output_tokens_est) for _, t in llm)
    assert sorted(c["hint"] for c in rec.calls) == sorted(t.difficulty_hint for _, t in llm)


def test_a_failed_call_fails_its_workflow_and_the_run_still_ends():
    jobs = _jobs(4)
    result = asyncio.run(_run(Recorder(fail_every=3), jobs))
    m = result.metrics()
    assert m["requests_failed"] >= 1 and m["errors"].get("http 500", 0) == m["requests_failed"]
    assert m["workflows_failed"] >= 1
    assert m["workflows_completed"] + m["workflows_failed"] == len(jobs)


# -- the command --------------------------------------------------------------------------

runner = CliRunner()
SMALL = ["--rate", "5", "--workflows", "3", "--cluster", "hetero-4", "--seed", "3"]
SMALL += ["--time-scale", str(SCALE), "--timeout-s", "10"]


@contextmanager
def serving(app: web.Application) -> Iterator[int]:
    """``app`` on 127.0.0.1 (an ephemeral port) in a thread of its own, for a CLI call."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict = {}

    async def start() -> None:
        box["runner"], box["port"] = await start_site(app, "127.0.0.1", 0)
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    assert started.wait(10)
    try:
        yield box["port"]
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def free_port() -> int:
    """A port nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _loadgen(url: str, *extra: str) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    result = runner.invoke(cli_app, ["loadgen", "--url", url, *SMALL, *extra])
    return result.exit_code, result.stdout, result.stderr, time.perf_counter() - t0


def _one_error_line(err: str, *words: str) -> None:
    assert err.startswith("error: --url:") and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://127.0.0.1/v1", ("http:// or https://", "ftp://")),
        ("not a url", ("http:// or https://", "'not a url'")),
        ("http://[::1/v1", ("malformed URL", "IPv6")),
        ("http://127.0.0.1:99999/v1", ("malformed URL", "Port out of range")),
        ("http://127.0.0.1:abc/v1", ("malformed URL",)),
        ("http://127.0.0.1:0/v1", ("port 0",)),
        ("http:///v1", ("names no host",)),
    ],
)
def test_a_url_that_cannot_be_a_server_is_refused_before_any_request(url, words):
    with pytest.raises(InputError) as exc:
        check_url(url)
    assert all(w in str(exc.value) for w in words), str(exc.value)
    code, out, err, _ = _loadgen(url)
    assert code == 2 and out == ""
    _one_error_line(err, *words)


def test_a_closed_port_fails_within_two_seconds():
    code, out, err, wall = _loadgen(f"http://127.0.0.1:{free_port()}/v1")
    assert code == 2 and out == "" and wall < 2.0, (code, wall)
    _one_error_line(err, "cannot reach", "connection refused")


def test_a_base_url_without_v1_asks_whether_v1_was_meant():
    recorder = Recorder()
    with serving(_app(recorder)) as port:
        code, out, err, wall = _loadgen(f"http://127.0.0.1:{port}/")
    assert code == 2 and out == "" and wall < 2.0
    _one_error_line(err, f"did you mean http://127.0.0.1:{port}/v1?")
    assert recorder.calls == []  # no workflow was sent


def test_a_server_that_is_not_openai_is_refused():
    async def html(_request: web.Request) -> web.Response:
        return web.Response(text="<html>hello</html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", html)
    with serving(app) as port:
        code, _, err, _ = _loadgen(f"http://127.0.0.1:{port}/v1")
    assert code == 2
    _one_error_line(err, "not JSON")
    empty = web.Application()  # every route 404, /v1 as well: no suggestion to make
    with serving(empty) as port:
        code, _, err, _ = _loadgen(f"http://127.0.0.1:{port}/v1")
    assert code == 2
    _one_error_line(err, "answers 404", "not an OpenAI-compatible base URL")


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_failed_workflows_exit_1_unless_allowed_and_json_stays_strict():
    with serving(_app(Recorder(fail_every=1))) as port:  # every call answers 500
        url = f"http://127.0.0.1:{port}/v1"
        code, out, err, _ = _loadgen(url, "--json")
        allowed, out_allowed, _, _ = _loadgen(url, "--json", "--allow-failures")
        human, text, human_err, _ = _loadgen(url)
    assert code == 1 and allowed == 0 and human == 1
    m = _strict(out)
    assert m["workflows_completed"] == 0 and m["workflows_failed"] == 3
    assert m["avg_response_time_s"] is None and "avg_response_time_s_null_reason" in m
    assert m["avg_ttft_s"] is None and m["errors"] == {"http 500": m["requests_failed"]}
    assert _strict(out_allowed)["workflows_failed"] == 3
    assert "3 of 3 workflows failed (http 500: " in err and "--allow-failures" in err
    assert "nan" not in text.lower() and "n/a (none completed)" in text
    assert "http 500: " in text and "{" not in text  # the errors by kind, not a dict
    assert "3 of 3 workflows failed" in human_err


def test_a_clean_run_exits_0_and_reports_progress_lines_off_a_terminal():
    recorder = Recorder()
    with serving(_app(recorder)) as port:
        code, out, err, _ = _loadgen(f"http://127.0.0.1:{port}/v1")
    assert code == 0, err
    assert "workflows_completed  3" in out and recorder.calls
    assert "workflows: 0/3" in err and "workflows: 3/3" in err and "error" not in err
