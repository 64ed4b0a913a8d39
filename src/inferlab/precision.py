"""Number formats for weights, activations and the KV cache, as data.

Each format says how many bits one element takes *including* its share of block
scales, and which tensor-core precision a matrix multiply with it runs at. Adding a
format is adding a row, never a branch.

References
----------
.. [1] Open Compute Project, "OCP Microscaling Formats (MX) Specification v1.0", 2023:
   32-element blocks sharing one 8-bit E8M0 scale (MXFP8, MXFP6, MXFP4).
.. [2] NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision inference",
   technical blog, 2025: 16-element blocks with an FP8 (E4M3) scale, plus one FP32
   scale per tensor (negligible per element).
.. [3] Frantar et al., "GPTQ", ICLR 2023; Lin et al., "AWQ", MLSys 2024: 4-bit weights
   in groups of 128 with a 16-bit scale (and zero point, packed with it). Groups of 32
   (4.5 bits a weight): the compressed-tensors INT4 checkpoints of Kimi K2 Thinking and
   Kimi-K2.5 (``quantization_config.config_groups``: ``num_bits 4, type int, strategy
   group, group_size 32``, symmetric: a BF16 scale, no zero point).
.. [4] ggml-org/llama.cpp, ggml/src/ggml-common.h (block_q8_0, block_q4_0: 32 weights and one
   FP16 scale; K-quants in 256-weight super-blocks) and the loader's own report of a
   Mistral-7B Q5_K_M file, "model size = 4.78 GiB (5.67 BPW)" (llama.cpp issue #5619).
   Q4_K_M mixes vary by model: 4.85 BPW is the usual figure for 7-8B llama-style files; a
   Qwen2.5-7B-based Q4_K_M file is "4.36 GiB" for "7,615,616,512" parameters (4.92 BPW).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UnknownNameError


@dataclass(frozen=True)
class NumberFormat:
    """One storage format.

    Attributes
    ----------
    name : str
        Catalog name, e.g. ``"nvfp4"``.
    element_bits : float
        Bits of one stored element, without scales [bit].
    block_size : int
        Elements sharing one block scale (0 when there is none).
    scale_bits : float
        Bits of one block scale [bit].
    compute : str
        Tensor precision a GEMM on this format runs at when the hardware supports it.
    fallback_compute : str
        Precision used when the hardware lacks ``compute`` (weights are dequantized).
    """

    name: str
    element_bits: float
    block_size: int
    scale_bits: float
    compute: str
    fallback_compute: str
    description: str

    @property
    def bits_per_element(self) -> float:
        """Stored bits per element including the block-scale share [bit]."""
        return self.element_bits + (self.scale_bits / self.block_size if self.block_size else 0.0)

    @property
    def bytes_per_element(self) -> float:
        """Stored bytes per element including the block-scale share [B]."""
        return self.bits_per_element / 8.0

    @property
    def weight_only(self) -> bool:
        """Narrower than the 16-bit GEMM it is dequantized into (INT4, the GGUF types): a weight
        format, whose activations and KV cache stay 16-bit."""
        return self.compute in ("bf16", "fp16") and self.element_bits < 16

    @property
    def gguf(self) -> bool:
        """A llama.cpp GGUF type: it quantizes the token embedding and the output layer too."""
        return self.name.startswith("q") and self.name[1:2].isdigit()


FORMATS: dict[str, NumberFormat] = {
    f.name: f
    for f in (
        NumberFormat("fp32", 32, 0, 0, "tf32", "tf32", "IEEE single precision"),
        NumberFormat("bf16", 16, 0, 0, "bf16", "bf16", "bfloat16"),
        NumberFormat("fp16", 16, 0, 0, "fp16", "fp16", "IEEE half precision"),
        NumberFormat("fp8", 8, 0, 0, "fp8", "bf16", "FP8 E4M3 with a per-tensor scale"),
        NumberFormat("fp8_block", 8, 128 * 128, 32, "fp8", "bf16",
                     "FP8 E4M3 with an FP32 scale per 128x128 block (DeepSeek-V3 checkpoints)"),
        NumberFormat("int8", 8, 0, 0, "int8", "bf16", "INT8 with per-channel scales"),
        NumberFormat("mxfp8", 8, 32, 8, "fp8", "bf16", "OCP MXFP8: 32-element blocks, E8M0 scale [1]"),
        NumberFormat("mxfp6", 6, 32, 8, "fp6", "bf16", "OCP MXFP6: 32-element blocks, E8M0 scale [1]"),
        NumberFormat("mxfp4", 4, 32, 8, "fp4", "bf16", "OCP MXFP4: 32-element blocks, E8M0 scale [1]"),
        NumberFormat("nvfp4", 4, 16, 8, "fp4", "bf16", "NVFP4: 16-element blocks, FP8 E4M3 scale [2]"),
        NumberFormat("int4", 4, 128, 16, "bf16", "bf16", "weight-only INT4, groups of 128, 16-bit scale [3]"),
        NumberFormat("int4_g32", 4, 32, 16, "bf16", "bf16", "weight-only INT4, groups of 32, 16-bit scale [3]"),
        # GGUF (llama.cpp) weight formats [4]; dequantized to 16 bits in the kernel.
        NumberFormat("q8_0", 8, 32, 16, "fp16", "fp16", "GGUF Q8_0: 32-element blocks, FP16 scale (8.5 bpw) [4]"),
        NumberFormat("q4_0", 4, 32, 16, "fp16", "fp16", "GGUF Q4_0: 32-element blocks, FP16 scale (4.5 bpw) [4]"),
        NumberFormat("q5_k_m", 5.69, 0, 0, "fp16", "fp16",
                     "GGUF Q5_K_M: mostly Q5_K (5.5 bpw) with Q6_K on some tensors, 5.69 bpw on average [4]"),
        NumberFormat("q4_k_m", 4.85, 0, 0, "fp16", "fp16",
                     "GGUF Q4_K_M: mostly Q4_K (4.5 bpw) with Q6_K on some tensors, 4.85 bpw on average [4]"),
    )
}


def number_format(name: str) -> NumberFormat:
    """Look up a format by name (case-insensitive).

    Raises
    ------
    UnknownNameError
        With the closest names when ``name`` is not a known format.

    Examples
    --------
    >>> number_format("nvfp4").bytes_per_element
    0.5625
    """
    found = FORMATS.get(name) if isinstance(name, str) else None  # the usual case: a canonical name
    if found is not None:
        return found
    key = str(name).strip().lower()
    if key not in FORMATS:
        raise UnknownNameError("precision", str(name), FORMATS)
    return FORMATS[key]
