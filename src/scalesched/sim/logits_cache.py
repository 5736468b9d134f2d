"""The logits cache of one run (``--logits-cache on``, Hive's re-sampling cache): branches
that re-sample from a shared point reuse the logits their group has already computed.

The branches of a test-time-scaling fan-out (best-of-n samples, self-consistency paths,
tree-of-thought expansions) continue one context with the same prompt, so each repeats its
group's *first path* token for token until it diverges (``TaskInstance.replay_tokens``, drawn
by :func:`scalesched.workload.sessions.mark_replays`). An engine that keeps the logits of
the positions it has computed along that first path can hand a branch its tokens up to the
divergence point without a forward pass; the branch decodes only the tokens after it.

Model, per engine (a cache lives and dies with its engine, like the KV cache):

* **Stored rows.** When a branch finishes, the engine keeps the logits of the first-path
  positions it computed: all of a first path's tokens, a later branch's tokens before its
  divergence. The group's entry is the deepest such position; it is charged to the engine's
  KV memory at ``logits_row_tokens(model)`` KV tokens a row (a full fp16 vocabulary row),
  stored only if that memory is free (else counted in ``dropped``), and freed when the
  group's last branch finishes.
* **Reuse at admission.** A branch admitted to an engine takes at once the positions that
  engine holds (stored rows, or rows a running sibling has produced so far), up to its
  divergence point. Their KV is computed as part of its prefill (a parallel pass over known
  tokens), so reuse turns sequential decode steps into prefill tokens.
* **Riding.** A branch that starts decoding while a running sibling on the same engine is
  still producing positions it will repeat follows that sibling: it leaves the decode batch
  (taking no compute) until the sibling passes its divergence point, then decodes the rest
  itself. Riding saves batch compute, not the branch's own latency: it advances at the
  sibling's pace. Siblings sharing a decode step is what a logits cache does for branches
  admitted together; it is the common case, as a fan-out's branches become ready at once.

Not modelled: rows of a branch's own divergent tail (no one repeats them), reuse across
engines (logits are not shipped between servers), and hedged copies (a hedged branch
neither reuses nor stores rows).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scalesched.cluster.perf import MODELS
from scalesched.kernel.metrics import LogitsRecord, packed

LOGIT_BYTES = 2
"""Bytes per stored logit (fp16)."""


def logits_row_tokens(model: str) -> float:
    """KV tokens of memory that one stored row of logits takes on ``model``'s engine."""
    spec = MODELS.get(model)
    if spec is None:
        return 0.0
    return spec.vocab_size * LOGIT_BYTES / spec.kv_bytes_per_token


@dataclass(slots=True)
class _Group:
    """One branch group's state across the engines of the run."""

    size: int
    finished: int = 0
    stored: dict[object, tuple[int, int]] = field(default_factory=dict)
    """Per engine: (deepest stored first-path position, KV tokens charged for it)."""
    running: dict[int, tuple[object, float, int]] = field(default_factory=dict)
    """Per decoding branch: (engine, decode clock at which it stood at position 0,
    first-path positions it repeats)."""


@dataclass(slots=True)
class _Branch:
    """An admitted branch call."""

    key: tuple[int, int]
    want: int
    """First-path positions it repeats (all but its last token for the first path itself)."""
    output: int
    replay: int
    """Tokens it repeats of its group's first path (0 for the first path)."""
    taken: int
    admitted_at: float
    reach: int = 0


_EPS = 1e-9


class LogitsCache:
    """Stored logits of a run's branch groups, and the measurements of every branch.

    ``reuse`` False measures the branches (service times, the positions they repeat)
    without caching anything: the baseline a ``--logits-cache on`` run is paired with."""

    def __init__(self, reuse: bool = True) -> None:
        self.reuse = reuse
        self._groups: dict[tuple[int, int], _Group] = {}
        self._branches: dict[int, _Branch] = {}
        self.dropped = 0
        """Rows not stored for want of free KV memory."""
        self.charged = 0
        self.peak = 0
        """Most KV tokens the run's stored logits took at once (all engines)."""
        self._jobs, self._first, self._out = array("q"), array("q"), array("q")
        self._replay, self._reused = array("q"), array("q")
        self._admitted, self._finished = array("d"), array("d")

    def admit(
        self,
        gid: int,
        key: tuple[int, int],
        size: int,
        index: int,
        output: int,
        replay: int,
        engine: object,
        vclock: float,
        now: float,
    ) -> int:
        """Branch ``gid`` (task ``index`` of a group of ``size`` keyed (job, first path)) is
        admitted to ``engine``: the positions it takes from the cache at once, whose KV its
        prefill computes (0 without reuse)."""
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(size)
        want = output - 1 if index == key[1] else replay
        taken = 0
        if self.reuse and want > 0:
            held = group.stored.get(engine, (0, 0))[0]
            for eng, start, repeats in group.running.values():
                if eng is engine:
                    held = max(held, min(repeats, int(vclock - start + _EPS)))
            taken = min(want, held)
        self._branches[gid] = _Branch(
            key, want, output, 0 if index == key[1] else replay, taken, now
        )
        return taken

    def start_decoding(self, gid: int, engine: object, vclock: float) -> tuple[int, float | None]:
        """Branch ``gid``'s prefill is done: (decode steps it runs itself, the decode clock
        at which it stops riding a sibling, or None when it does not ride)."""
        b = self._branches[gid]
        group = self._groups[b.key]
        reach, ride_end = b.taken, None
        if self.reuse and b.want > reach:
            for eng, start, repeats in group.running.values():
                r = min(repeats, b.want)
                # a sibling level with or ahead of it that will produce more positions
                if eng is engine and r > reach and start + b.taken <= vclock + _EPS:
                    reach, ride_end = r, start + r
        if ride_end is not None and ride_end <= vclock + _EPS:
            ride_end = None  # produced already: taken now (the sibling's KV is live)
        start = vclock - reach if ride_end is None else ride_end - reach
        group.running[gid] = (engine, start, b.want)
        b.reach = reach
        return max(1, b.output - reach), ride_end

    def finished(
        self,
        gid: int,
        engine: object,
        row_tokens: float,
        make_room: Callable[[int], bool],
        now: float,
    ) -> list[tuple[object, int]]:
        """Branch ``gid`` finished on ``engine``: store its rows if ``make_room(tokens)``
        frees that much KV memory there, and record it. Returns (engine, KV tokens) to
        charge (> 0) or free (< 0)."""
        b = self._branches.pop(gid)
        group = self._groups[b.key]
        group.running.pop(gid, None)
        self._jobs.append(b.key[0])
        self._first.append(b.key[1])
        self._out.append(b.output)
        self._replay.append(b.replay)
        self._reused.append(b.reach)
        self._admitted.append(b.admitted_at)
        self._finished.append(now)
        changes: list[tuple[object, int]] = []
        depth, charge = group.stored.get(engine, (0, 0))
        if self.reuse and b.want > depth:
            need = math.ceil(b.want * row_tokens)
            if make_room(need - charge):
                group.stored[engine] = (b.want, need)
                changes.append((engine, need - charge))
                self.charged += need - charge
                self.peak = max(self.peak, self.charged)
            else:
                self.dropped += 1
        group.finished += 1
        if group.finished >= group.size:
            for eng, (_, held) in group.stored.items():
                changes.append((eng, -held))
                self.charged -= held
            del self._groups[b.key]
        return changes

    def cancelled(self, gid: int) -> None:
        """A branch copy stopped before finishing: it produces no more positions."""
        b = self._branches.pop(gid, None)
        if b is not None and b.key in self._groups:
            self._groups[b.key].running.pop(gid, None)

    def record(self) -> LogitsRecord:
        a = packed
        return LogitsRecord(
            reuse=self.reuse,
            jobs=a(self._jobs, np.int64),
            first=a(self._first, np.int64),
            output_tokens=a(self._out, np.int64),
            repeat_tokens=a(self._replay, np.int64),
            reused_tokens=a(self._reused, np.int64),
            admitted_s=a(self._admitted, np.float64),
            finished_s=a(self._finished, np.float64),
            peak_tokens=self.peak,
            dropped=self.dropped,
        )
