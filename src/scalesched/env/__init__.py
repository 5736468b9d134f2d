"""The Gymnasium face of the simulator: ``scalesched/Scheduling-v0``."""

from scalesched.env.scheduling_env import (
    EnvConfig,
    SchedulingEnv,
    encode,
    observation_space,
    register,
)

register()

__all__ = ["EnvConfig", "SchedulingEnv", "encode", "observation_space", "register"]
