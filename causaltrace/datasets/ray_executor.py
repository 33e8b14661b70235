"""Scale-out on Ray: each worker of a split is a Ray task (a local instance or a cluster).

    causaltrace-generate executor=ray num_workers=8 ray.address=auto   # on a Ray cluster
    causaltrace-generate executor=ray num_workers=2                     # a local Ray instance

Workers take the same shards they would under any other launcher (shard % num_workers ==
worker_index), so a Ray run writes the same bytes as a single process. The dataset directory
must be on storage every node can write (a shared file system or a mounted bucket).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from causaltrace.datasets.generation import run
from causaltrace.datasets.job import Job
from causaltrace.datasets.split_check import check_existing
from causaltrace.errors import CausalTraceError


def _worker(config: Mapping[str, Any], worker_index: int, num_workers: int) -> dict:
    # The driver checked what the directory holds (generate_with_ray): not once per task.
    return run(Job.from_config(config), worker_index, num_workers, show_progress=False, check=False)


def generate_with_ray(
    config: Mapping[str, Any],
    num_workers: int,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    checked: bool = False,
) -> list[dict]:
    """Run ``num_workers`` generation workers as Ray tasks and wait for all of them.

    What the dataset directory holds is checked once, here, before any task starts
    (:func:`~causaltrace.datasets.split_check.check_existing`), unless the caller has
    (``checked=True``)."""
    if not checked:
        check_existing(Job.from_config(config))
    try:
        # optional: the ray extra
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise CausalTraceError("executor=ray needs Ray: pip install 'causaltrace[ray]'") from exc
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            ignore_reinit_error=True,
        )
    try:
        task = ray.remote(num_cpus=1)(_worker)
        futures = [task.remote(dict(config), i, num_workers) for i in range(num_workers)]
        return ray.get(futures)
    finally:
        if started_here:
            ray.shutdown()
