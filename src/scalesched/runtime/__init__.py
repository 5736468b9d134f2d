"""Execute agentic workflows on a real Ray cluster with any scalesched policy.

Each Ray node is one server (it declares ``scalesched_server:<name>``, see
``runtime.cluster``); a per-node agent executes the tasks the policy places there; the
driver keeps the decision view from its own bookkeeping and reports the simulator's
metrics. See docs/runtime.md. Ray is imported only when a run starts.
"""

from scalesched.runtime.agent import FaultConfig, TaskSpec
from scalesched.runtime.driver import (
    Driver,
    RuntimeConfig,
    RuntimeResult,
    WorkflowFailure,
    run_jobs,
)

__all__ = [
    "Driver",
    "FaultConfig",
    "RuntimeConfig",
    "RuntimeResult",
    "TaskSpec",
    "WorkflowFailure",
    "run_jobs",
]
