"""Bandwidth a collective sees on the scale-up fabric [B/s per GPU, per direction]."""

from __future__ import annotations

from ..errors import InfeasibleError
from ..specs.hardware import HardwareSpec


def scale_up_bandwidth(hw: HardwareSpec, group_size: int) -> float:
    """Per-direction bandwidth one GPU has toward the others of a ``group_size`` group.

    Notes
    -----
    Switched fabrics (NVSwitch) give every GPU its full link bandwidth; a full mesh
    (AMD Infinity Fabric) gives ``(group_size - 1) x peer_bandwidth`` (64 GB/s per peer on
    MI300X, so TP=2 sees 64 GB/s); without a fabric the GPUs talk over PCIe.

    Raises
    ------
    InfeasibleError
        When the group is larger than the scale-up domain.
    """
    up = hw.scale_up
    domain = int(up.domain_size.si)
    if group_size > domain and up.kind not in ("pcie", "none"):
        raise InfeasibleError(
            f"a tensor-parallel group of {group_size} exceeds the {domain}-GPU scale-up domain of {hw.id}; "
            f"use tp <= {domain} (crossing nodes is priced by the parallelism techniques)"
        )
    if up.kind in ("pcie", "none") or up.bandwidth is None:
        if hw.pcie is None or hw.pcie.bandwidth is None:
            raise InfeasibleError(f"{hw.id} has no scale-up link or PCIe bandwidth in its spec")
        return hw.pcie.bandwidth.si
    if up.topology == "full-mesh" and up.peer_bandwidth is not None:
        return min(up.bandwidth.si, (group_size - 1) * up.peer_bandwidth.si)
    return up.bandwidth.si
