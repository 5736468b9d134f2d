"""The load generator: every LLM call of every workflow sent once, after its parents,
with the header convention and max_tokens = the true output length; failures counted."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.serve.engine import start_site
from scalesched.serve.loadgen import LoadGenerator
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


async def _run(recorder: Recorder, jobs):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", recorder.handle)
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
