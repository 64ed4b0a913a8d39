"""Collectives timed on the links they cross: the scale-up fabric inside a node, the
scale-out NICs between nodes, hierarchically when a group spans both.

A group of ``p`` GPUs fills scale-up domains (an 8-GPU HGX board, a 72-GPU NVL72 rack;
PCIe-only cards: an 8-GPU server) before spilling to the next node. Bandwidths are per
GPU and per direction.

References
----------
.. [1] Thakur, Rabenseifner, Gropp, "Optimization of collective communication operations
   in MPICH", IJHPCA 2005 (ring and recursive algorithms, their step counts).
.. [2] NVIDIA NCCL documentation, "Performance reported by NCCL tests" (bus bandwidth
   2(p-1)/p x S / t for all-reduce).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..calibration.profile import Profile
from ..errors import InfeasibleError
from ..specs.hardware import HardwareSpec

#: GPUs per server when the device has no scale-up fabric of its own (PCIe cards).
PCIE_SERVER_GPUS = 8
#: Largest message an engine's own kernel may all-reduce in one shot: the range of the published
#: one-shot measurement (SGLang PR #2904, 512 B to 1 MiB); larger ones take its two-shot kernel.
CUSTOM_ALL_REDUCE_MAX_BYTES = 2**20
#: Buffers an engine's own all-reduce kernel takes (vLLM's ``CustomAllreduce(max_size=8192 *
#: 1024)``, SGLang's copy of it; TensorRT-LLM taken alike): larger ones go to NCCL, and only
#: those can run NCCL's NVLS. Between :data:`CUSTOM_ALL_REDUCE_MAX_BYTES` and this the engine
#: runs the faster of its two-shot kernel and NCCL.
ENGINE_NCCL_MIN_BYTES = 8 * 2**20
#: Most bus bandwidth an engine's own all-reduce kernel moves [B/s] (``2(p-1)/p x S`` over its
#: time): it runs on a few thread blocks, not at the link's rate, so Hopper and Blackwell alike
#: reach about 250 GB/s. vLLM PR #24111 (H100, 6 GPUs): its two-shot kernel takes 17, 26 and 37 us
#: for 1, 2 and 4 MB (3 MB more in 20 us: 262 GB/s); PR #37756 (B300): 23 us at 1 MiB, 74 us at
#: 8 MiB (7 MiB more in 51 us: 252 GB/s), though NVLink 5 moves twice Hopper's NVLink 4.
CUSTOM_ALL_REDUCE_BUS_BANDWIDTH = 250e9
#: Fabrics whose engines' two-shot kernel has published timings past 1 MiB (the two above, on
#: NVLink): on AMD's Infinity Fabric none is, so past one-shot's 1 MiB the engine runs RCCL.
TWO_SHOT_MEASURED = ("nvlink", "nvlink-bridge")
#: Fabrics the engines' own all-reduce kernels run over (peer-to-peer loads over NVLink or
#: AMD's Infinity Fabric); over PCIe, or a TPU's ICI (XLA's collectives), NCCL's curve stands.
CUSTOM_ALL_REDUCE_FABRICS = ("nvlink", "nvlink-bridge", "infinity-fabric")
#: Most GPUs an engine's own all-reduce kernel spans: vLLM's and SGLang's take 2, 4, 6 or 8
#: and the measurement is of 8; a larger NVLink domain (an NVL72 rack) runs NCCL's curve.
CUSTOM_ALL_REDUCE_MAX_GPUS = 8


@dataclass(frozen=True)
class GroupLayout:
    """How a group of GPUs is spread over nodes, and the links it uses [B/s per GPU per direction]."""

    size: int
    per_node: int
    nodes: int
    intra_bandwidth: float
    network_bandwidth: float

    @property
    def crosses_nodes(self) -> bool:
        """Whether the group spans more than one scale-up domain."""
        return self.nodes > 1


def node_size(hw: HardwareSpec) -> int:
    """GPUs that share one scale-up domain (or one PCIe server)."""
    if hw.scale_up.kind in ("pcie", "none"):
        return PCIE_SERVER_GPUS
    return int(hw.scale_up.domain_size.si)


def intra_bandwidth(hw: HardwareSpec, group_size: int) -> float:
    """Per-direction bandwidth one GPU has toward ``group_size - 1`` peers in its node.

    Notes
    -----
    Switched fabrics (NVSwitch) give every GPU its full link bandwidth; a full mesh
    (AMD Infinity Fabric) gives ``(group_size - 1) x peer_bandwidth`` (64 GB/s per peer on
    MI300X, so TP=2 sees 64 GB/s); without a fabric the GPUs talk over PCIe, and how depends
    on the server (:func:`pcie_share`).
    """
    up = hw.scale_up
    if up.kind in ("pcie", "none") or up.bandwidth is None:
        if hw.pcie is None or hw.pcie.bandwidth is None:
            raise InfeasibleError(f"{hw.id} has no scale-up link or PCIe bandwidth in its spec")
        return hw.pcie.bandwidth.si * pcie_share(hw, group_size)
    if up.topology == "full-mesh" and up.peer_bandwidth is not None:
        return min(up.bandwidth.si, max(group_size - 1, 1) * up.peer_bandwidth.si)
    return up.bandwidth.si


def pcie_share(hw: HardwareSpec, group_size: int) -> float:
    """Share of its own PCIe link one GPU of a ``group_size`` group gets for collectives.

    Notes
    -----
    With GPU peer-to-peer (``topology: pcie-switch``, datacenter cards behind the PCIe
    switches of an 8-GPU server) every GPU drives its own x16 link at once: a ring moves
    at link rate whatever the group size, so the share is 1. Without peer-to-peer
    (``topology: host``: GeForce cards, whose driver does not enable it, or a board whose
    IOMMU/ACS settings block it) NCCL stages every transfer through pinned host memory, so
    the ``p`` concurrent ring flows share the host's path of about one link: ``2 / p``
    (1 for two GPUs, whose two flows run in opposite directions).

    References
    ----------
    .. [5] NVIDIA, "GPUDirect Peer to Peer" (direct GPU-to-GPU copies over PCIe without the
       host); NCCL environment variables, ``NCCL_P2P_DISABLE`` (host-staged fallback).
    """
    up = hw.scale_up
    if up.kind in ("pcie", "none") and up.topology == "host" and group_size > 2:
        return 2.0 / group_size
    return 1.0


def layout(hw: HardwareSpec, group_size: int) -> GroupLayout:
    """Place a group of ``group_size`` GPUs: fill a node, then the next."""
    per_node = min(group_size, node_size(hw))
    nodes = math.ceil(group_size / per_node)
    nic = hw.scale_out.bandwidth.si if hw.scale_out is not None else 0.0
    if nodes > 1 and nic <= 0:
        raise InfeasibleError(
            f"a group of {group_size} GPUs spans {nodes} nodes of {per_node} {hw.id}, but the spec has no "
            "scale-out NIC to join them"
        )
    return GroupLayout(group_size, per_node, nodes, intra_bandwidth(hw, per_node), nic)


def scale_up_bandwidth(hw: HardwareSpec, group_size: int) -> float:
    """Per-direction scale-up bandwidth of a group that fits in one node."""
    return intra_bandwidth(hw, min(group_size, node_size(hw)))


def _intra(layout_: GroupLayout, profile: Profile) -> tuple[float, float]:
    return layout_.intra_bandwidth * profile.collective.bandwidth_fraction, profile.collective.latency_s


def _network(layout_: GroupLayout, profile: Profile) -> tuple[float, float]:
    c = profile.collective
    return layout_.network_bandwidth * c.network_bandwidth_fraction, c.network_latency_s


def _steps_s(profile: Profile, steps: float) -> float:
    """Fixed time of ``steps`` algorithm steps of an NCCL collective in the node [s]: its launch
    and synchronisation (``latency_s``) and a hop per step (``hop_latency_s``), as NCCL's own
    tuning model costs a ring (a base latency plus one per step); a profile without a hop
    latency charges ``latency_s`` per step."""
    c = profile.collective
    return c.latency_s + steps * c.hop_latency_s if c.hop_latency_s > 0.0 else steps * c.latency_s


def _nccl_s(profile: Profile, steps: float, link_bytes, link_bandwidth: float) -> np.ndarray:
    """Time of an NCCL collective in the node of ``steps`` steps that moves ``link_bytes`` over
    each GPU's link of ``link_bandwidth`` [B/s] [s]: the faster of its protocols, as NCCL picks
    one by message size [2]_. The low-latency ones (LL, LL128: flags ride with the data, so a
    step is short, at a share of the link) are :func:`_steps_s` and ``bandwidth_fraction``;
    where the profile times the Simple protocol apart (``simple_*``: a pipeline that fills
    before it streams, so a larger fixed time at a larger share of the link), it takes over
    the large messages. On 8 H100s (ops-public.csv) 1 MiB all-reduces in 25 us and 4 MiB in
    51 us: one line through both misses the middle by up to half."""
    c, b = profile.collective, np.asarray(link_bytes, float)
    t = _steps_s(profile, steps) + b / (link_bandwidth * c.bandwidth_fraction)
    if c.simple_bandwidth_fraction > 0.0:
        # as the low-latency line: a base and a hop a step, or (no hop fitted) its latency a step
        fixed = c.simple_latency_s + steps * c.simple_hop_latency_s if c.hop_latency_s > 0.0 \
            else steps * c.simple_latency_s
        t = np.minimum(t, fixed + b / (link_bandwidth * c.simple_bandwidth_fraction))
    return t


def in_switch_reduction(hw: HardwareSpec) -> bool:
    """Whether the scale-up switch reduces data itself (NVLink SHARP, "NVLS"): the
    third-generation NVSwitch of HGX H100/H200 boards (NVLink 4) and its successors."""
    up = hw.scale_up
    gen = re.search(r"\d+", up.generation or "")  # "4", "NVLink 5", "5th generation"
    return up.kind == "nvlink" and up.topology == "switched" and gen is not None and int(gen.group()) >= 4


def all_reduce_s(message_bytes, group_size: int, hw: HardwareSpec, profile: Profile, *,
                 switch_reducible: bool = True) -> np.ndarray:
    """All-reduce of ``message_bytes`` per GPU over ``group_size`` GPUs [s].

    Notes
    -----
    Inside a node: the faster of ring (``2(p-1)`` steps moving ``2(p-1)/p x S``: a fixed latency
    and a hop a step, :func:`_steps_s`) and one-shot (one step, each GPU reads the ``p-1`` other
    buffers), at NCCL's fitted latencies;
    on a switch that reduces in the fabric (:func:`in_switch_reduction`), also NCCL's NVLS
    algorithm [4]_: each GPU sends its buffer into the switch and reads the reduced one back,
    ``S`` each way instead of the ring's ``2(p-1)/p x S``, at its own measured share of the
    link and fixed time (``nvls_bandwidth_fraction``, ``nvls_latency_s``: its pipeline fills
    before the switch streams, so it wins on large buffers). The switch's multimem reductions take 16-, 32- and
    64-bit elements, not 8-bit ones [6]_ (``switch_reducible``: False for an 8-bit buffer);
    engines all-reduce activations in 16 bits. NCCL sets NVLS up for more than two GPUs (at
    two a ring moves ``S`` as well).
    Serving engines (vLLM, SGLang, TensorRT-LLM) run their own all-reduce kernels inside an
    NVLink domain instead of NCCL for the small messages of decode: one flag barrier, then
    every GPU loads its peers' buffers directly (one-shot), or reduces its ``1/p`` shard and
    gathers the shards (two-shot, two barriers). Their latency ``custom_latency_s`` is a few
    microseconds where NCCL's is 15-25 us on 8 GPUs [5]_; the faster of the three paths is
    taken, as the engines choose by message size: one-shot up to :data:`CUSTOM_ALL_REDUCE_MAX_BYTES`,
    two-shot up to the kernel's buffer (:data:`ENGINE_NCCL_MIN_BYTES`), both at most at the
    kernel's own bus bandwidth (:data:`CUSTOM_ALL_REDUCE_BUS_BANDWIDTH`) and at the share of the
    link NCCL's best protocol reaches (0.65 x 300 GB/s = 196 GB/s on an A100). Across ``n`` nodes of ``q`` GPUs:
    reduce-scatter in the node, all-reduce of the ``S/q`` shard between nodes over the NICs,
    all-gather in the node. On a switched fabric (NVSwitch, NVL72) each in-node half is one
    step (every GPU reads or writes its ``1/q`` shard of each peer at once:
    ``(q-1)/q S / B_node``), not a ring of ``q-1`` hops; a full mesh or PCIe runs the
    ring. The two halves are one collective's steps: one fixed time. Between nodes the faster of a ring (``2(n-1)`` steps) and NCCL's double binary
    tree (``2 ceil(log2 n)`` steps moving ``2 S/q``), and for small messages the tree in NCCL's
    low-latency (LL) protocol: shorter steps (``network_ll_latency_s``) at
    :data:`LL_BANDWIDTH_SHARE` of the bandwidth, which NCCL picks for a decode step's few tokens.

    References
    ----------
    .. [3] NVIDIA, "NCCL 2.4: double binary trees", 2019 (log-depth latency between nodes).
    .. [4] NVIDIA, "NVLink SHARP / NVLS in NCCL 2.17+", 2023 (one-step in-switch reduction).
    .. [6] NVIDIA, PTX ISA, ``multimem.ld_reduce`` (integer types .u32/.s32/.u64/.s64/.b32/.b64,
       floating-point vectors of 32 to 128 bits: .f16x2, .bf16x2, .f32 ...). ops-public.csv shows
       it: on 8 H100s 128 MiB all-reduces in 0.579 ms as fp16, 0.722 ms as int8.
    .. [5] SGLang PR #2904 "optimize custom allreduce kernel" (2025-01): on H100, 512 B
       all-reduced in 3.7 / 4.8 / 5.9 us over TP 2 / 4 / 8 with the custom kernel, against
       9.5 / 9.1 / 10.1 us for vLLM's earlier one; ops-public.csv has NCCL at 15.5 us (H100)
       and 25 us (B200) over 8 GPUs at that size.
    """
    s = np.asarray(message_bytes, float)
    lay = layout(hw, group_size)
    bw, lat = _intra(lay, profile)
    q = lay.per_node
    if not lay.crosses_nodes:
        if q == 1:
            return np.zeros_like(s)
        c = profile.collective
        ring = _nccl_s(profile, 2 * (q - 1), 2 * (q - 1) / q * s, lay.intra_bandwidth)
        # NCCL has no one-shot algorithm: with a hop latency fitted, its small messages are the
        # ring's (in its low-latency protocols, whose steps the hop stands for)
        nccl = ring if c.hop_latency_s > 0.0 else np.minimum(ring, lat + (q - 1) * s / bw)
        custom = c.custom_latency_s
        own = custom > 0.0 and hw.scale_up.kind in CUSTOM_ALL_REDUCE_FABRICS and q <= CUSTOM_ALL_REDUCE_MAX_GPUS
        if switch_reducible and q > 2 and c.nvls_bandwidth_fraction > 0.0 and in_switch_reduction(hw):
            nvls = c.nvls_latency_s + s / (lay.intra_bandwidth * c.nvls_bandwidth_fraction)
            # an engine hands NCCL only what its own kernel does not take
            nccl = np.minimum(nccl, np.where(s > ENGINE_NCCL_MIN_BYTES, nvls, np.inf) if own else nvls)
        if not own:
            return nccl
        # at most the kernel's own rate, and the share of the link NCCL's best protocol reaches
        kernel_bw = min(lay.intra_bandwidth * max(c.bandwidth_fraction, c.simple_bandwidth_fraction),
                        CUSTOM_ALL_REDUCE_BUS_BANDWIDTH)
        engine_one_shot = custom + (q - 1) * s / kernel_bw
        engine_two_shot = 2 * custom + 2 * (q - 1) / q * s / kernel_bw
        two_shot_max = ENGINE_NCCL_MIN_BYTES if hw.scale_up.kind in TWO_SHOT_MEASURED else CUSTOM_ALL_REDUCE_MAX_BYTES
        engine = np.where(s <= CUSTOM_ALL_REDUCE_MAX_BYTES, np.minimum(engine_one_shot, engine_two_shot),
                          np.where(s <= two_shot_max, engine_two_shot, np.inf))
        return np.minimum(nccl, engine)
    nbw, nlat = _network(lay, profile)
    n = lay.nodes
    hops = 1 if _switched(hw) else q - 1  # steps of each in-node half (reduce-scatter, all-gather)
    # both halves in the one collective NCCL runs: their steps and bytes, one fixed time (a
    # protocol's pipeline fills once, not once a half)
    intra = _nccl_s(profile, 2 * hops, 2 * (q - 1) / q * s, lay.intra_bandwidth) if q > 1 else 0.0
    shard = s / q
    ring = 2 * (n - 1) * nlat + 2 * (n - 1) / n * shard / nbw
    tree = 2 * math.ceil(math.log2(n)) * nlat + 2 * shard / nbw
    between = np.minimum(ring, tree)
    ll = profile.collective.network_ll_latency_s
    if ll > 0.0:  # NCCL's LL protocol: shorter steps at a fraction of the bandwidth, for small messages
        between = np.minimum(between, 2 * math.ceil(math.log2(n)) * ll + 2 * shard / (nbw * LL_BANDWIDTH_SHARE))
    return intra + between


#: Share of the network bandwidth NCCL's LL protocol moves between nodes: each 8-byte word
#: carries a 4-byte flag, and NCCL's own tuning model takes a tree's LL bandwidth as 1/3.8 of
#: its Simple protocol's (NVIDIA/nccl src/graph/tuning.cc, ``ncclTopoTuneModel``).
LL_BANDWIDTH_SHARE = 1.0 / 3.8


def _switched(hw: HardwareSpec) -> bool:
    """Whether the scale-up fabric is a switch (every GPU reaches every peer at full link rate)."""
    up = hw.scale_up
    return up.kind not in ("pcie", "none") and up.bandwidth is not None and up.topology == "switched"


def all_gather_s(total_bytes, group_size: int, hw: HardwareSpec, profile: Profile) -> np.ndarray:
    """All-gather of a buffer of ``total_bytes`` (each GPU holds ``1/p`` of it) [s].

    Inside a node a ring of ``q-1`` steps, or on a switched fabric one step (every GPU
    writes its shard to each peer at once), as the in-node halves of :func:`all_reduce_s`;
    between nodes a ring of ``n-1`` steps, in NCCL's LL protocol where that is the faster.
    """
    s = np.asarray(total_bytes, float)
    lay = layout(hw, group_size)
    q = lay.per_node
    hops = 1 if _switched(hw) else q - 1
    intra = _nccl_s(profile, hops, (q - 1) / q * s / lay.nodes, lay.intra_bandwidth) if q > 1 else 0.0
    if not lay.crosses_nodes:
        return np.asarray(intra + 0.0 * s)
    nbw, nlat = _network(lay, profile)
    n = lay.nodes
    between = (n - 1) * nlat + (n - 1) / n * s / q / nbw
    ll = profile.collective.network_ll_latency_s
    if ll > 0.0:  # small messages in NCCL's LL protocol, as in all_reduce_s
        between = np.minimum(between, (n - 1) * ll + (n - 1) / n * s / q / (nbw * LL_BANDWIDTH_SHARE))
    return intra + between


def all_to_all_s(bytes_per_gpu, group_size: int, hw: HardwareSpec, profile: Profile) -> np.ndarray:
    """All-to-all in which each GPU sends ``bytes_per_gpu`` spread evenly over the group [s].

    Notes
    -----
    A share ``(q-1)/(p-1)`` of the remote traffic stays in the node, ``(p-q)/(p-1)`` crosses
    the NIC; both links run at once, so the slower sets the time. Every GPU sends to all its
    peers at once (grouped sends and receives), so inside the node it is one step of NCCL's
    protocols (:func:`_nccl_s`), not a ring's.
    """
    s = np.asarray(bytes_per_gpu, float)
    p = group_size
    if p == 1:
        return np.zeros_like(s)
    lay = layout(hw, p)
    remote = s * (p - 1) / p
    intra_share = (lay.per_node - 1) / (p - 1)
    t_intra = _nccl_s(profile, 1, remote * intra_share, lay.intra_bandwidth) if lay.per_node > 1 else 0.0 * s
    if not lay.crosses_nodes:
        return t_intra
    nbw, nlat = _network(lay, profile)
    return np.maximum(t_intra, nlat + remote * (1 - intra_share) / nbw)


def p2p_s(message_bytes, crosses_nodes: bool, hw: HardwareSpec, profile: Profile) -> np.ndarray:
    """Point-to-point send of ``message_bytes`` to the next pipeline stage [s]: inside the node
    one step of NCCL's protocols (:func:`_nccl_s`), the faster of them."""
    s = np.asarray(message_bytes, float)
    if crosses_nodes:
        if hw.scale_out is None or hw.scale_out.bandwidth.si <= 0:
            raise InfeasibleError(f"pipeline stages on separate nodes of {hw.id} need a scale-out NIC between them, "
                                  "and the spec has none; keep tp x pp within one node "
                                  f"({node_size(hw)} GPUs), or pick hardware with a network")
        lay = layout(hw, node_size(hw) + 1)
        nbw, nlat = _network(lay, profile)
        return nlat + s / nbw
    return _nccl_s(profile, 1, s, scale_up_bandwidth(hw, 2))
