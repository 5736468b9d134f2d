"""scalesched: place the tasks of agentic LLM workflows on heterogeneous GPU/CPU clusters.

Importing the package registers the Gymnasium environment ``scalesched/Scheduling-v0`` (as
``import ale_py`` or ``import minigrid`` register theirs). The registration names the
environment class by an entry-point string, so ``import scalesched`` stays light: the
simulator, numpy-heavy tables and torch load only on ``gym.make``.
"""

__version__ = "0.2.0.dev0"

ENV_ID = "scalesched/Scheduling-v0"


def _register_envs() -> None:
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # gymnasium is a dependency, but the package works without it
        return
    if ENV_ID not in registry:
        register(id=ENV_ID, entry_point="scalesched.env.scheduling_env:SchedulingEnv")


_register_envs()
