"""The decision contract every engine, policy and runtime shares.

``features`` (the Decision record, the ClusterStateView protocol, the one feature module),
``scheduler`` (the Scheduler protocol and BaseScheduler), ``actions`` (Place, Hedge, Defer,
LoadReplica), ``redeploy`` (Redeploy and the deployment diff it is carried out by) and
``cycle`` (the one decision loop, ``drive``). It imports only the specs
(cluster, workload); the executors, the policies and the networks import it.
"""

from scalesched.decision.actions import Action, Defer, Hedge, LoadReplica, Place, as_action

__all__ = ["Action", "Defer", "Hedge", "LoadReplica", "Place", "as_action"]
