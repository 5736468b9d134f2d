"""Serving live traffic (docs/serve.md): an emulated OpenAI-compatible engine timed by the
engine model (``engine``), a gateway that places each call with a scalesched policy
through the decision cycle (``gateway`` over the live state of ``state``), and a load
generator that runs the project's workflows as agents (``loadgen``).

Library: aiohttp for the servers and the load generator's client (one asyncio package
instead of Starlette/uvicorn plus httpx); the gateway's calls to its backends go through
its own lean HTTP/1.1 client (``upstream``), and its plain calls are read in front of
aiohttp's server (``front``): both measured cheaper per call. prometheus-client for the
gateway's /metrics.
Both are the ``serve`` extra; nothing here is imported by the simulator or the policies.
"""
