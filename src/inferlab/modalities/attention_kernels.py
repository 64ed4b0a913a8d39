"""Which flash-attention kernel a forward pass runs, and what share of the tensor peak it reaches.

Physics
-------
A non-autoregressive pass (a vision encoder, a diffusion transformer) spends much of its time
in bidirectional attention over long sequences. What that costs depends on the kernel the
implementation calls more than on the GPU's datasheet:

- ``fa2`` (FlashAttention-2: ``flash_attention_2`` in transformers, and the flash backend of
  PyTorch's ``scaled_dot_product_attention``): 50-73% of the A100's dense peak [1] (0.6 taken;
  Ada and the sm_120 Blackwell parts, RTX 5090 and RTX PRO 6000, run the same sm80 code and are
  taken at it too); on Hopper it cannot use the warpgroup tensor-core instructions and reaches
  329.5 of the H100's 989 dense BF16 TFLOPS at head dim 128 [2] (0.33; "only 35% utilization on
  the H100" [3]); the datacenter Blackwell parts run that sm80 code as well, taken at Hopper's
  share (no published figure). Head dims are compiled in steps of 32 up to 192, then 256: a
  head of 72 or 80 computes as 96. It needs an Ampere or later GPU.
- ``fa3`` (FlashAttention-3): 631.8 TFLOPS on that H100 shape [2] (0.64 on Hopper; elsewhere,
  where newer builds run it, no published share: the datasheet's); head dims 64, 96, 128, 192
  and 256.
- ``cudnn`` (cuDNN's fused attention, an SDPA backend): 631.3 TFLOPS on that H100 shape [2]
  (0.64 on Hopper; elsewhere the datasheet's); any head dim that is a multiple of 8.
- ``datasheet``: the named default share of :class:`~.passes.Efficiency` (0.6), head dims as
  they are; what a pass assumes when its kernel is not known.

Which kernel PyTorch's SDPA runs depends on its release and the call: cuDNN came first on the
H100 in 2.5, was made opt-in after bugs of that release (pull request #138522) and is preferred
again on Hopper and Blackwell once the bundled cuDNN is 9.15.1 or later (from 2.11); the flash
backend takes no arbitrary mask. An SDPA run whose release and mask are not known is
``datasheet``. A GPU family with no published share takes the datasheet's, head dims as they are.

References
----------
.. [1] Dao, "FlashAttention-2", ICLR 2024, Fig. 5-7.
.. [2] pytorch/pytorch issue #142132 (December 2024), tritonbench on an H100, batch 1, 24
   heads, sequence 4,608, head dim 128: "sdpa-tflops 329.483, cudnn_90100-tflops 631.338,
   flash_v3-tflops 631.827".
.. [3] Shah et al., "FlashAttention-3", 2024, abstract.
"""

from __future__ import annotations

import math

from ..errors import SpecError
from ..specs.hardware import HardwareSpec

#: Kernels and their published share of the dense tensor peak, by GPU family.
KERNELS: dict[str, dict[str, float]] = {
    "datasheet": {},
    "fa2": {"ampere": 0.6, "ada": 0.6, "hopper": 0.33, "blackwell": 0.33},
    "fa3": {"hopper": 0.64},
    "cudnn": {"hopper": 0.64},
}

#: Head dims FlashAttention-3 is compiled for; FlashAttention-2's and FlashAttention-3's largest.
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)
MAX_FLASH_HEAD_DIM = 256
#: GPU families older than Ampere, where the FlashAttention kernels do not run.
PRE_AMPERE = ("turing", "volta", "pascal")


def _family(hw: HardwareSpec) -> str:
    from ..calibration.profile import hardware_family

    return hardware_family(hw.architecture)


def _check(kernel: str, hw: HardwareSpec) -> str:
    if kernel not in KERNELS:
        raise SpecError(f"attention kernel must be one of {', '.join(KERNELS)}, got {kernel!r:.40}")
    family = _family(hw)
    if kernel != "datasheet" and (hw.kind != "gpu" or hw.vendor not in ("NVIDIA", "AMD")):
        raise SpecError(f"attention kernel {kernel}: a CUDA (FlashAttention-2 also a ROCm) kernel, which {hw.id} "
                        f"({hw.vendor}, {hw.kind}) does not run: use datasheet")
    if kernel == "cudnn" and hw.vendor != "NVIDIA":
        raise SpecError(f"attention kernel cudnn is NVIDIA's library; {hw.id} is {hw.vendor}'s: use fa2 or datasheet")
    if kernel in ("fa2", "fa3") and family in PRE_AMPERE:
        raise SpecError(f"FlashAttention needs an Ampere or later GPU; {hw.id} is {hw.architecture}: "
                        "use datasheet or cudnn")
    if kernel == "fa3" and family != "hopper":  # its kernels are built for sm_90 (H100, H200, H800, H20)
        raise SpecError(f"FlashAttention-3 runs on Hopper GPUs only; {hw.id} is {hw.architecture}: use "
                        f"{'fa2, cudnn' if hw.vendor == 'NVIDIA' else 'fa2'} or datasheet")
    return family


def attention_fraction(kernel: str, hw: HardwareSpec, datasheet: float) -> float:
    """Share of ``hw``'s dense tensor peak ``kernel`` reaches; ``datasheet`` where none is published."""
    family = _check(kernel, hw)
    return float(KERNELS[kernel].get(family, datasheet))


def kernel_head_dim(kernel: str, head_dim: float, hw: HardwareSpec) -> float:
    """The head dim ``kernel`` computes with on ``hw`` for a head of ``head_dim`` (padded up to a
    size it is compiled for; as it is where the kernel's share on ``hw`` is not published)."""
    if not head_dim > 0:
        raise SpecError(f"attention head dim must be positive, got {head_dim!r}")
    if _check(kernel, hw) not in KERNELS[kernel]:
        return float(head_dim)
    if kernel in ("fa2", "fa3") and head_dim > MAX_FLASH_HEAD_DIM:
        raise SpecError(f"FlashAttention runs head dims up to {MAX_FLASH_HEAD_DIM}, got {head_dim:g}: "
                        "use datasheet or cudnn")
    if kernel == "fa2":
        return float(math.ceil(head_dim / 32) * 32) if head_dim <= 192 else float(MAX_FLASH_HEAD_DIM)
    if kernel == "fa3":
        return float(next(d for d in FA3_HEAD_DIMS if d >= head_dim))
    return float(math.ceil(head_dim / 8) * 8)  # cudnn
