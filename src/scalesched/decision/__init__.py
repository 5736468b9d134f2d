"""The decision contract every engine, policy and runtime shares (issue: "Architecture").

It starts with the actions a scheduler may return; the decision record, tables, state view
and features follow it here from ``scalesched.policies.features``.
"""

from scalesched.decision.actions import Action, Defer, Hedge, Place, as_action

__all__ = ["Action", "Defer", "Hedge", "Place", "as_action"]
