"""A change of deployment mid-run: the request a re-planner carries with an answer, and the
diff that says what it costs.

A planned world's simulator serves each model on a server as one replica group (the
deployment's replicas of that model there, ``perf.ReplicaGroupPerf``). Moving from one
deployment to another therefore changes groups, never single replicas:

* a group only the new deployment has is **loaded**: it takes free GPUs (waiting for the
  groups that leave to free them), is busy for the model's load time, then serves;
* a group only the old one has is **unloaded** after it drains: it takes no new call (the
  new tables make it infeasible), finishes what it holds, then gives its GPUs back;
* a group both have with different replicas (count, tensor-parallel degree or GPU share)
  is **resized**: a larger one holds its extra GPUs while the new replicas load for the
  model's load time and then serves with the new group's speed; a smaller one gives its
  surplus GPUs back at once (the replicas it drops take no further call);
* a group both have alike is kept as it runs.

The executor computes nothing else: ``deployment_diff`` is the one place the diff is made,
and the simulator's books (``redeploy_*`` metrics) count what it carried out.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalesched.cluster.tables import MODEL_NAMES, ClusterTables


@dataclass(frozen=True, eq=False)
class Redeploy:
    """Switch the run to the deployment whose tables are ``tables`` (same cluster, planned:
    ``ClusterTables(spec, deployment)``); carried in an answer's ``loads`` and carried out
    after the answer's placement. Only the simulator carries it out."""

    tables: ClusterTables

    def __post_init__(self) -> None:
        if not self.tables.pinned:
            raise ValueError("Redeploy needs a deployment's tables (ClusterTables(spec, d))")


Group = tuple[int, str]
"""(server index, model name): one replica group."""


@dataclass(frozen=True)
class DeploymentDiff:
    """What moving from one deployment's tables to another's does, group by group."""

    loads: tuple[Group, ...]
    unloads: tuple[Group, ...]
    resizes: tuple[Group, ...]
    kept: tuple[Group, ...]

    @property
    def empty(self) -> bool:
        return not (self.loads or self.unloads or self.resizes)


def same_group(old: ClusterTables, new: ClusterTables, s: int, m: int) -> bool:
    """Whether server ``s`` runs the same replicas of model ``m`` under both tables."""
    if not (old.feasible[s, m] and new.feasible[s, m]):
        return False
    return group_key(old.engines[int(old.engine_class[s, m])]) == group_key(
        new.engines[int(new.engine_class[s, m])]
    )


def group_key(perf: object) -> tuple[object, ...]:
    """What makes two replica groups alike (their perf objects are cached, but a forked
    simulation holds copies)."""
    return tuple(getattr(perf, f, None) for f in ("model", "gpu_type", "tp", "share", "count"))


def deployment_diff(old: ClusterTables, new: ClusterTables) -> DeploymentDiff:
    """The groups a move from ``old`` to ``new`` loads, unloads, resizes and keeps, in
    (server, model) order. Both must be deployments of the same cluster."""
    if not (old.pinned and new.pinned):
        raise ValueError("a deployment diff needs two deployments' tables")
    if old.names != new.names:
        raise ValueError("a deployment diff needs two deployments of the same cluster")
    loads: list[Group] = []
    unloads: list[Group] = []
    resizes: list[Group] = []
    kept: list[Group] = []
    for s in range(old.n):
        for m, model in enumerate(MODEL_NAMES):
            was, will = bool(old.feasible[s, m]), bool(new.feasible[s, m])
            if will and not was:
                loads.append((s, model))
            elif was and not will:
                unloads.append((s, model))
            elif was and will:
                (kept if same_group(old, new, s, m) else resizes).append((s, model))
    return DeploymentDiff(tuple(loads), tuple(unloads), tuple(resizes), tuple(kept))
