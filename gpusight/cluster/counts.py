"""The fleet's counts, derived once from a frame and worded once: the cluster view's header, host rows and host
screen, and the ``--once`` report.

The free-GPU figure is the sum of the GPUs :func:`gpusight.cluster.fleet_advice.judge_free` marked, the same
figure the host rows and the ``fleet_free_gpus`` advice show.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.cluster.frame import ClusterFrame, ClusterNode


def counted(count: int, noun: str) -> str:
    """``1 node``, ``2 nodes``: ``count`` and ``noun``, plural unless the count is one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def node_gpus(node: ClusterNode) -> str:
    """``8 GPUs, 2 free``: a node's GPUs and its free ones, as its row, its screen and ``--once`` show them; a down
    node's GPUs alone (its values are old)."""
    return counted(len(node.gpus), "GPU") + (f", {node.free_gpus} free" if node.up else "")


@dataclass(frozen=True, slots=True)
class FleetCounts:
    """How many nodes, GPUs and free GPUs a frame holds."""

    nodes: int
    """Nodes found, up or down."""
    down: int
    """Nodes not reporting."""
    gpus: int
    """GPUs of every node (a down node's from its last values)."""
    free: int
    """Free GPUs (see ``ClusterGpu.free``)."""

    @classmethod
    def of(cls, frame: ClusterFrame) -> FleetCounts:
        """The counts of ``frame``."""
        return cls(
            nodes=len(frame.nodes),
            down=sum(1 for node in frame.nodes if not node.up),
            gpus=sum(len(node.gpus) for node in frame.nodes),
            free=sum(node.free_gpus for node in frame.nodes),
        )

    def parts(self) -> tuple[str, str, str, str]:
        """``("3 nodes", " (1 down)", "32 GPUs", "5 free")``: the words shown, in order ("" when none is down)."""
        down = f" ({self.down} down)" if self.down else ""
        return counted(self.nodes, "node"), down, counted(self.gpus, "GPU"), f"{self.free} free"
