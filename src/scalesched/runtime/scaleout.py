"""Scale-out evaluation: the runs of a study as Ray tasks instead of a local process pool.

Each run is a pure function of its ``RunSpec`` (``eval.study.run_one``), so where it runs
does not change its result: identical seeds give identical rows on one process, a process
pool or a Ray cluster. ``run_on_ray`` is what ``scalesched eval --ray-address ADDR`` /
``--ray-local`` call (see docs/runtime.md for the two-line hook in ``eval/study.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def ray_connection(address: str | None, *, object_store_mb: int = 80) -> Iterator[None]:
    """Connected to ``address``, or to a fresh single-node local Ray (``None``); reuses a
    connection the caller already holds, and shuts down only what it started."""
    import ray

    if ray.is_initialized():
        yield
        return
    temp = None
    if address is None:
        from scalesched.runtime.cluster import RAY_ENV

        for key, value in RAY_ENV.items():
            os.environ.setdefault(key, value)
        temp = tempfile.mkdtemp(prefix="ssray-")
        ray.init(
            num_cpus=os.cpu_count() or 1,
            object_store_memory=object_store_mb * 1024 * 1024,
            include_dashboard=False,
            _temp_dir=temp,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    else:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def run_on_ray(
    fn: Callable[[Any], T],
    items: Sequence[Any],
    *,
    address: str | None = None,
    on_done: Callable[[int, int], None] | None = None,
    num_cpus: float = 1.0,
) -> list[T]:
    """``[fn(item) for item in items]``, each call a Ray task (one CPU each by default),
    results in ``items`` order; ``on_done(done, total)`` as they finish."""
    import ray

    with ray_connection(address):
        remote = ray.remote(num_cpus=num_cpus, max_retries=1)(fn)
        refs = [remote.remote(item) for item in items]
        index = {ref: i for i, ref in enumerate(refs)}
        out: list[Any] = [None] * len(refs)
        pending = list(refs)
        done_count = 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                out[index[ref]] = ray.get(ref)
                done_count += 1
                if on_done:
                    on_done(done_count, len(refs))
        return out
