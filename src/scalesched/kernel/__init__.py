"""The executor kernel: what the simulator, the Ray runtime and the gateway share below
their own event loops: the run ledger (arrivals, readiness, completion, the state arrays a
decision reads, run records), the LLM-engine model (admission, decode-step times,
eviction), HEFT ranks over revealed workflows, task records and lower bounds, and the
steady-state metrics computed from a run record."""
