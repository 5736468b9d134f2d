"""Planning GPU allocations for multi-LLM workflows (Scepsy-style): shares, the Aggregate
LLM Pipeline predictor, allocation search and placement, and the ``plan`` command."""
