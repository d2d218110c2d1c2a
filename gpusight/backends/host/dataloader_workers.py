"""Recognising PyTorch DataLoader workers and the GPU process each one feeds.

Since torch 2.5 every DataLoader worker names itself ``pt_data_worker`` (its ``comm``). Under
the fork and spawn start methods a worker is a child of the trainer; under forkserver its parent
is the forkserver process, itself a descendant of the trainer. A worker therefore belongs to its
nearest ancestor that is a GPU process. Other descendants (resource tracker, forkserver,
compile workers) are not workers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from gpusight.backends.host.proctree import Descendant

WORKER_NAME = "pt_data_worker"
"""The ``comm`` a PyTorch (>= 2.5) DataLoader worker process sets for itself."""


def attribute_workers(
    gpu_pids: Collection[int], descendants: Mapping[int, Descendant]
) -> dict[int, list[int]]:
    """Map each GPU pid that has DataLoader workers below it to its workers' pids, sorted.

    ``descendants`` is a walk from ``gpu_pids`` (see ``ProcessTree.descendants``). A worker
    that is itself a GPU process is listed as a GPU process, not as a worker.
    """
    workers: dict[int, list[int]] = {}
    for node in descendants.values():
        if node.name != WORKER_NAME or node.pid in gpu_pids:
            continue
        trainer = _nearest_gpu_ancestor(node, gpu_pids, descendants)
        if trainer is not None:
            workers.setdefault(trainer, []).append(node.pid)
    for pids in workers.values():
        pids.sort()
    return workers


def _nearest_gpu_ancestor(
    node: Descendant, gpu_pids: Collection[int], descendants: Mapping[int, Descendant]
) -> int | None:
    """Follow parent links from ``node`` up to the first GPU pid; None if the chain breaks."""
    parent = node.ppid
    for _ in range(len(descendants) + 1):
        if parent in gpu_pids:
            return parent
        above = descendants.get(parent)
        if above is None:
            return None
        parent = above.ppid
    return None
