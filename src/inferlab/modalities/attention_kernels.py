"""Which flash-attention kernel a forward pass runs, and what share of the tensor peak it reaches.

Physics
-------
A non-autoregressive pass (a vision encoder, a diffusion transformer) spends much of its time
in bidirectional attention over long sequences. What that costs depends on the kernel the
implementation calls more than on the GPU's datasheet:

- ``fa2`` (FlashAttention-2: ``flash_attention_2`` in transformers, and PyTorch's
  ``scaled_dot_product_attention``, whose flash backend it is): 50-73% of the A100's dense peak
  [1] (0.6 taken, as for Ada, which runs the same sm80 code path); on Hopper it cannot use the
  warpgroup tensor-core instructions and reaches 329.5 of the H100's 989 dense BF16 TFLOPS at
  head dim 128 [2] (0.33; "only 35% utilization on the H100" [3]); Blackwell runs the same
  sm80 path, taken at Hopper's share (no published figure). Head dims are compiled in steps of
  32 up to 128 (then 64): a head of 72 or 80 computes as 96.
- ``fa3`` (FlashAttention-3, Hopper only): 631.8 TFLOPS on that H100 shape [2] (0.64); head
  dims 64, 96, 128, 192 and 256.
- ``cudnn`` (cuDNN's fused attention, PyTorch's SDPA backend on Hopper and Blackwell when
  selected): 631.3 TFLOPS on that H100 shape [2] (0.64 on Hopper; elsewhere the datasheet
  share); any head dim that is a multiple of 8.
- ``datasheet``: the named default share of :class:`~.passes.Efficiency` (0.6), head dims as
  they are; what a pass assumes when its kernel is not stated.

PyTorch's SDPA picked cuDNN first on the H100 in release 2.5, then made it opt-in (pull
request #138522, after bugs of that release) until cuDNN 9.15.1, bundled from 2.11: SDPA on
an H100 before that runs FlashAttention-2.

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

#: Kernels and their share of the dense tensor peak, by GPU family (``None``: the datasheet share).
KERNELS: dict[str, dict[str, float | None]] = {
    "datasheet": {},
    "fa2": {"ampere": 0.6, "ada": 0.6, "hopper": 0.33, "blackwell": 0.33},
    "fa3": {"hopper": 0.64},
    "cudnn": {"hopper": 0.64},
}

#: Head dims FlashAttention-3 is compiled for.
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)


def _family(hw: HardwareSpec) -> str:
    from ..calibration.profile import hardware_family

    return hardware_family(hw.architecture)


def attention_fraction(kernel: str, hw: HardwareSpec, datasheet: float) -> float:
    """Share of ``hw``'s dense tensor peak ``kernel`` reaches; ``datasheet`` where it names none."""
    if kernel not in KERNELS:
        raise SpecError(f"attention kernel must be one of {', '.join(KERNELS)}, got {kernel!r:.40}")
    family = _family(hw)
    if kernel == "fa3" and family != "hopper":
        raise SpecError(f"FlashAttention-3 runs on Hopper GPUs only; {hw.id} is {hw.architecture}: "
                        "use fa2, cudnn or datasheet")
    share = KERNELS[kernel].get(family)
    return datasheet if share is None else float(share)


def kernel_head_dim(kernel: str, head_dim: float) -> float:
    """The head dim ``kernel`` computes with for a head of ``head_dim`` (padded up to a size it
    is compiled for)."""
    if kernel == "fa2":
        step = 32 if head_dim <= 128 else 64
        return float(math.ceil(head_dim / step) * step)
    if kernel == "fa3":
        return float(next((d for d in FA3_HEAD_DIMS if d >= head_dim), head_dim))
    if kernel == "cudnn":
        return float(math.ceil(head_dim / 8) * 8)
    return float(head_dim)
