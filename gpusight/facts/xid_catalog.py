"""What an Xid number means and what to do about it, after NVIDIA's Xid catalog.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer GPUs),
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, whose "Resolution Bucket
(Immediate Action)" column gives the action each entry's :class:`XidAction` follows. Where that column
names a workflow (``WORKFLOW_XID_48``, ``WORKFLOW_NVLINK_ERR``) or says to follow another Xid (154), the
action is the workflow's usual outcome, said so in the entry's advice. The meanings are gpusight's own
short words, not the catalog's text. Only the Xids seen on ML clusters are listed; the others are shown
by number with :data:`UNKNOWN_MEANING`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
"""NVIDIA's Xid catalog, which this table follows."""


class XidAction(Enum):
    """The catalog's immediate action for an Xid, from least to most disruptive."""

    IGNORE = "ignore"
    """Informational: nothing to do unless it repeats."""
    RESTART_APP = "restart the application"
    """The application that hit it failed; the GPU itself is fine."""
    CONTACT_SUPPORT = "contact support"
    """Unexpected on this GPU: report it to NVIDIA (or the vendor) if it repeats; no drain by itself."""
    RESET_GPU = "reset the GPU"
    """Drain the GPU and reset it (``nvidia-smi -r``) before the next job."""
    REBOOT_NODE = "reboot the node"
    """Drain the node and reboot it; the GPU may need reseating or replacing."""


@dataclass(frozen=True, slots=True)
class XidInfo:
    """One catalog entry: what the Xid means and what to do."""

    code: int
    """The Xid number."""
    meaning: str
    """A short meaning, e.g. ``"GPU has fallen off the bus"``."""
    action: XidAction
    """The catalog's immediate action."""
    advice: str
    """The usual action in a sentence."""
    reset_follows: bool = False
    """True when the Xid leaves a memory row remap pending, which only a GPU reset applies: the GPU must be
    drained although the catalog's immediate action is milder (Xid 94: the application restarts, the GPU
    still needs its reset before the next job)."""

    @property
    def drains(self) -> bool:
        """True when the GPU must be drained: it needs a reset or the node a reboot."""
        return self.reset_follows or self.action in (XidAction.RESET_GPU, XidAction.REBOOT_NODE)


_ENTRIES = (
    XidInfo(8, "GPU stopped processing (channel timeout)", XidAction.RESTART_APP,
            "restart the application; contact support if it repeats"),
    XidInfo(13, "graphics engine exception", XidAction.RESTART_APP,
            "usually an application bug (out-of-range access): run it under compute-sanitizer"),
    XidInfo(31, "GPU memory page fault", XidAction.RESTART_APP,
            "usually an illegal address in the application: run it under compute-sanitizer"),
    XidInfo(32, "invalid or corrupted push buffer stream", XidAction.RESTART_APP,
            "restart the application; if it repeats, check the PCIe link"),
    XidInfo(38, "driver firmware watchdog timeout", XidAction.IGNORE,
            "nothing to do unless it repeats; then update the driver"),
    XidInfo(43, "GPU stopped processing (application fault)", XidAction.IGNORE,
            "follows an application's own error; nothing to do for the GPU"),
    XidInfo(45, "preemptive cleanup after an earlier error or a killed process", XidAction.IGNORE,
            "nothing to do; look at the Xid before it"),
    XidInfo(46, "GPU stopped processing (GPU timeout)", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(48, "double-bit ECC error", XidAction.RESET_GPU,
            "drain and reset the GPU (the catalog's workflow: a reset remaps the row); replace it if it repeats"),
    XidInfo(61, "internal micro-controller breakpoint", XidAction.CONTACT_SUPPORT,
            "unexpected: report it if it repeats"),
    XidInfo(62, "internal micro-controller halt", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(63, "ECC page retirement or row remapping recorded", XidAction.IGNORE,
            "nothing to do now: the remap applies at the next GPU reset (shown as a pending remap)"),
    XidInfo(64, "ECC page retirement or row remapping failed", XidAction.RESET_GPU,
            "drain and reset the GPU; if it fails again the GPU needs replacing"),
    XidInfo(68, "video decoder (NVDEC) exception", XidAction.RESTART_APP, "restart the decoding application"),
    XidInfo(69, "graphics engine class error", XidAction.RESTART_APP, "restart the application"),
    XidInfo(74, "NVLink error", XidAction.RESET_GPU,
            "drain and reset the GPU (the catalog's NVLink workflow); check the link if it repeats"),
    XidInfo(79, "GPU has fallen off the bus", XidAction.REBOOT_NODE,
            "drain the node and reboot it; check the GPU's seating, power and PCIe slot if it repeats"),
    XidInfo(92, "high single-bit ECC error rate", XidAction.IGNORE,
            "corrected for now; watch the ECC counts and replace the GPU if they keep rising"),
    XidInfo(94, "contained ECC error", XidAction.RESTART_APP,
            "only the application that touched the bad memory failed: restart it; the row remap then pending "
            "needs a GPU reset", reset_follows=True),
    XidInfo(95, "uncontained ECC error", XidAction.RESET_GPU,
            "every application on the GPU is affected: drain and reset it now"),
    XidInfo(109, "context switch timeout", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(119, "GSP firmware RPC timeout", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(120, "GSP firmware error", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(136, "NVLink training failed", XidAction.RESET_GPU, "drain and reset the GPU; check the NVLink"),
    XidInfo(140, "unrecovered ECC error", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(143, "GPU initialization failed", XidAction.RESET_GPU, "drain and reset the GPU"),
    XidInfo(154, "GPU recovery action changed", XidAction.RESET_GPU,
            "follow the recovery action the driver logged with it (reset or reboot)"),
)

XID_CATALOG: dict[int, XidInfo] = {entry.code: entry for entry in _ENTRIES}
"""The catalog entries gpusight knows, by Xid number."""

UNKNOWN_MEANING = "see NVIDIA's Xid catalog"
"""Meaning shown for an Xid number not in :data:`XID_CATALOG`."""


def xid_info(code: int) -> XidInfo:
    """The catalog entry for ``code``; an unknown code gets :data:`UNKNOWN_MEANING` and no drain."""
    known = XID_CATALOG.get(code)
    if known is not None:
        return known
    return XidInfo(code, UNKNOWN_MEANING, XidAction.IGNORE, f"look up Xid {code} in {CATALOG_URL}")
