"""EnvSched: environment-aware scheduling of our own training rollouts.

Not every training environment teaches as much: at load 0.5 on a map-reduce workload any
placement is fine, at load 0.9 on deep research a bad placement costs minutes. EnvSched
spends rollouts where the learning signal is (after Prioritized Level Replay, Jiang et al.
2021, and environment-aware schedulers of RL rollouts):

* **Settings** are (workload pattern, load, mix of the 16 training servers, warm-up
  length). N stays 16, so every variant trained this way keeps the zero-shot claim.
* **Priority** of a setting is an exponential moving average of its learning signal: the
  mean absolute GAE advantage of the steps it produced (large where the value function is
  still wrong, i.e. where there is something left to learn), turned into a sampling weight
  by rank (``1 / rank ** (1 / temperature)``, ties sharing a rank) and mixed with a
  staleness term so nothing is forgotten.
* **Cold start**: a setting never sampled gets the similarity-weighted mean of the scores
  of the settings that were (a harmonic extension over a k-nearest-neighbour graph of the
  settings' feature vectors), instead of a blind default.
* **Per-batch quota with a similarity penalty**: the settings of one batch of episodes are
  drawn one at a time, each draw multiplying every remaining weight by
  ``1 - penalty * similarity`` to the ones already drawn, and at most ``max_share`` of the
  batch may share a workload pattern, so a batch does not repeat near-identical settings.

``UniformSampler`` is the baseline with the same interface. Both are plain numpy; the
trainer feeds them the signal (``update``) and asks for the settings of the next episodes
(``sample``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata

from scalesched.env.settings import EnvSetting, default_settings

__all__ = ["EnvSchedSampler", "EnvSetting", "SettingQueue", "UniformSampler", "default_settings"]


def similarity_matrix(settings: list[EnvSetting], k: int = 8, width: float = 1.0) -> np.ndarray:
    """Gaussian-kernel similarity, kept for each setting's k nearest neighbours (symmetric,
    zero diagonal)."""
    x = np.stack([s.features() for s in settings])
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    w = np.exp(-d2 / (2 * width**2))
    np.fill_diagonal(w, 0.0)
    keep = np.zeros_like(w, dtype=bool)
    nearest = np.argsort(-w, axis=1)[:, :k]
    np.put_along_axis(keep, nearest, True, axis=1)
    keep |= keep.T
    return np.where(keep, w, 0.0)


class UniformSampler:
    """The baseline: every setting equally likely, independently."""

    def __init__(self, settings: list[EnvSetting], seed: int = 0) -> None:
        self.settings = settings
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xE5]))

    def sample(self, k: int) -> list[int]:
        return [int(i) for i in self.rng.integers(len(self.settings), size=k)]

    def update(self, index: int, signal: float) -> None:
        return None


class EnvSchedSampler:
    """Prioritised, similarity-aware sampling of training settings (module docstring)."""

    def __init__(
        self,
        settings: list[EnvSetting],
        *,
        seed: int = 0,
        temperature: float = 1.0,
        staleness: float = 0.1,
        ema: float = 0.5,
        penalty: float = 0.5,
        max_share: float = 0.25,
        neighbours: int = 8,
    ) -> None:
        if not settings:
            raise ValueError("EnvSched needs at least one setting")
        self.settings = settings
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xE5]))
        self.temperature, self.staleness, self.ema = temperature, staleness, ema
        self.penalty, self.max_share = penalty, max_share
        self.sim = similarity_matrix(settings, k=min(neighbours, max(1, len(settings) - 1)))
        n = len(settings)
        self.score = np.full(n, np.nan)
        """EMA of the learning signal per setting; NaN until first sampled."""
        self.last_drawn = np.zeros(n)
        self.draws = 0

    def scores_with_prior(self) -> np.ndarray:
        """Observed scores, with the cold-start prior filled in for settings never seen."""
        seen = ~np.isnan(self.score)
        if not seen.any():
            return np.ones(len(self.settings))
        filled = np.where(seen, self.score, np.nanmean(self.score))
        # Harmonic extension: unseen scores = similarity-weighted mean of their neighbours,
        # iterated to a fixed point with the seen scores clamped.
        degree = self.sim.sum(1)
        for _ in range(50):
            spread = np.divide(self.sim @ filled, degree, out=filled.copy(), where=degree > 0)
            new = np.where(seen, self.score, spread)
            if np.allclose(new, filled, rtol=1e-6, atol=1e-12):
                break
            filled = new
        return filled

    def weights(self) -> np.ndarray:
        """Sampling weights before the batch penalty: rank priority mixed with staleness."""
        scores = self.scores_with_prior()
        ranks = rankdata(-scores, method="average")  # ties share a rank: no order bias
        priority = ranks ** (-1.0 / self.temperature)
        priority /= priority.sum()
        stale = self.draws - self.last_drawn
        staleness = (
            stale / stale.sum() if stale.sum() > 0 else np.full(len(scores), 1 / len(scores))
        )
        return (1 - self.staleness) * priority + self.staleness * staleness

    def sample(self, k: int) -> list[int]:
        """Indices of ``k`` settings for the next episodes (see the module docstring)."""
        w = self.weights()
        per_pattern: dict[str, int] = {}
        cap = max(1, math.ceil(self.max_share * k))
        chosen: list[int] = []
        for _ in range(k):
            allowed = w.copy()
            for i, s in enumerate(self.settings):
                if per_pattern.get(s.workload, 0) >= cap:
                    allowed[i] = 0.0
            if allowed.sum() <= 0:
                allowed = w.copy()
            i = int(self.rng.choice(len(w), p=allowed / allowed.sum()))
            chosen.append(i)
            per_pattern[self.settings[i].workload] = (
                per_pattern.get(self.settings[i].workload, 0) + 1
            )
            w = w * np.clip(1 - self.penalty * self.sim[i], 0.05, 1.0)
            w[i] *= 0.05  # the same setting twice in a batch: possible, not likely
        self.draws += 1
        self.last_drawn[chosen] = self.draws
        return chosen

    def update(self, index: int, signal: float) -> None:
        """Feed the learning signal (mean |advantage|) one episode of setting ``index`` gave."""
        if not math.isfinite(signal):
            return
        old = self.score[index]
        self.score[index] = signal if np.isnan(old) else (1 - self.ema) * old + self.ema * signal


class SettingQueue:
    """Hands the environments their next setting, one sampled batch at a time (so the
    per-batch quota and similarity penalty act on the episodes that start together)."""

    def __init__(self, sampler: EnvSchedSampler | UniformSampler, batch: int) -> None:
        self.sampler, self.batch = sampler, batch
        self._next: list[int] = []

    def __call__(self) -> tuple[int, EnvSetting]:
        if not self._next:
            self._next = list(reversed(self.sampler.sample(self.batch)))
        i = self._next.pop()
        return i, self.sampler.settings[i]

    def feed(self, settings: np.ndarray, advantages: np.ndarray) -> int:
        """Give the sampler the learning signal of one rollout: per setting, the mean
        absolute advantage of its steps. Returns how many settings got a signal."""
        seen = 0
        for i in np.unique(settings):
            if i < 0:
                continue
            self.sampler.update(int(i), float(np.abs(advantages[settings == i]).mean()))
            seen += 1
        return seen
