"""Planning GPU allocations for multi-LLM workflows (Scepsy-style): shares, the Aggregate
LLM Pipeline predictor, allocation search and placement, and the ``plan`` command."""

PLANNER_VERSION = "scepsy-greedy-v6"
"""Changes whenever the search or its predictor changes what a plan is: cached plans and
planned-world capacities of another version are never read (``scalesched.runs.world``)."""
