"""The Gymnasium face of the simulator: ``scalesched/Scheduling-v0``."""

from scalesched.env.scheduling_env import (
    STEADY_REWARD_SCALE,
    EnvConfig,
    SchedulingEnv,
    encode,
    observation_space,
    register,
)

register()

__all__ = [
    "STEADY_REWARD_SCALE",
    "EnvConfig",
    "SchedulingEnv",
    "encode",
    "observation_space",
    "register",
]
