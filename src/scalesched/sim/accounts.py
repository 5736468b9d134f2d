"""The simulation's accounts, a part of it: the busy integrals of every server brought up
to date, read over the whole run or over the measurement window (marked at the arrivals of
its first and last workflow), and the workflow-seconds spent in the system."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation


class Accounts:
    """Reads the simulation's busy integrals; keeps the window's marks."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.marks: list[tuple[np.ndarray, np.ndarray, float]] = []
        """(GPU areas, CPU areas, in-system area) at the window's first and last arrival."""

    def mark_window(self) -> None:
        sim = self.sim
        self.close()
        marks = (np.array(sim._gpu_area), np.array(sim._cpu_area), sim.in_system_area)
        self.marks.append(marks)

    def window_utilisation(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(GPU, CPU) busy fractions per server over the measurement window (None if the
        window is empty: a single job, or the run has not reached its last arrival)."""
        sim = self.sim
        if len(self.marks) < 2:
            return None
        (g0, c0, _), (g1, c1, _) = self.marks[0], self.marks[-1]
        first, last = sim.window
        span = sim.arrival_time(last) - sim.arrival_time(first)
        if span <= 0:
            return None
        t = sim.tables
        return (g1 - g0) / (np.maximum(t.gpus, 1) * span), (c1 - c0) / (t.cores * span)

    def window_in_system_area(self) -> float | None:
        """Workflow-seconds in the system during the measurement window."""
        if len(self.marks) < 2:
            return None
        return self.marks[-1][2] - self.marks[0][2]

    def close(self) -> None:
        """Bring the utilisation integrals up to the current time."""
        sim = self.sim
        for s in range(sim.tables.n):
            sim._tools.cpu_account(s)
            sim._gpu_area[s] += sim._busy_gpus[s] * (sim.now - sim._gpu_mark[s])
            sim._gpu_mark[s] = sim.now

    def utilisation(self, horizon: float) -> tuple[np.ndarray, np.ndarray]:
        """(GPU, CPU) busy fractions per server over ``horizon`` seconds."""
        sim = self.sim
        t = sim.tables
        h = max(horizon, 1e-12)
        gpu = np.array(sim._gpu_area) / (np.maximum(t.gpus, 1) * h)
        cpu = np.array(sim._cpu_area) / (t.cores * h)
        return gpu, cpu
