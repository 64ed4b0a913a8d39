"""Pack small models onto MIG slices instead of whole GPUs.

Each model gets the smallest MIG profile of the GPU whose memory holds its weights plus a
headroom for KV cache and activations; the slices are then packed onto as few GPUs as
possible, first-fit by decreasing size, within each GPU's 7 compute slices and 8 memory
slices (:func:`inferlab.specs.mig.slice_shares`). NVIDIA's placement rules forbid some
mixes of profiles on one GPU (the MIG user guide's placement diagrams); this counts slices
only, so a packing it finds is a lower bound on the GPUs needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..checks import real
from ..errors import InfeasibleError, SpecError
from ..specs.catalog import load_hardware, load_model
from ..specs.mig import slice_shares

#: Memory kept beside the weights for KV cache and activations, as a share of the weights.
HEADROOM = 0.25


@dataclass(frozen=True)
class Placement:
    """One model on one slice."""

    model: str
    gpu: int
    profile: str
    need_bytes: float


@dataclass(frozen=True)
class Packing:
    """Models on MIG slices of ``hardware``."""

    hardware: str
    placements: tuple[Placement, ...]

    @property
    def gpus(self) -> int:
        """GPUs the packing uses."""
        return 1 + max(p.gpu for p in self.placements)

    @property
    def gpus_saved(self) -> int:
        """Whole GPUs saved against one GPU per model."""
        return len(self.placements) - self.gpus


def smallest_profile(model: str, hardware: str, *, precision: str = "bf16", headroom: float = HEADROOM) -> tuple[str, float]:
    """``(profile, bytes needed)``: the smallest MIG profile holding ``model``'s weights x (1 + headroom).

    Raises
    ------
    InfeasibleError
        Not even the whole-GPU profile holds it.
    """
    hw = load_hardware(hardware)
    if hw.mig is None:
        raise SpecError(f"{hw.id} has no MIG profiles; pick a GPU that lists them ('inferlab hardware show ID')")
    headroom = real("headroom (a share of the weights)", headroom, minimum=0.0, maximum=100.0)
    need = load_model(model).weight_bytes(precision) * (1.0 + headroom)
    for prof in sorted(hw.mig.profiles, key=lambda p: (p.memory.si, p.compute_slices)):
        if prof.memory.si >= need:
            return prof.name, need
    biggest = max(p.memory.si for p in hw.mig.profiles)
    raise InfeasibleError(f"{model} needs {need / 1e9:.1f} GB at {precision} with {headroom:.0%} headroom; the "
                          f"largest slice of {hw.id} holds {biggest / 1e9:.0f} GB", needed_bytes=need,
                          available_bytes=biggest)


def pack(models: list[str], hardware: str, *, precision: str = "bf16", headroom: float = HEADROOM) -> Packing:
    """Place each of ``models`` on its smallest slice and pack the slices onto GPUs.

    Examples
    --------
    >>> p = pack(["llama-3.1-8b", "qwen3-8b", "phi-3-mini", "mistral-7b"], "h100-sxm")
    >>> p.gpus, [x.profile for x in p.placements]
    (2, ['3g.40gb', '3g.40gb', '1g.20gb', '1g.10gb'])
    """
    if isinstance(models, str) or not isinstance(models, (list, tuple)):  # a str would be packed letter by letter
        raise SpecError(f"pack takes a list of models, e.g. ['llama-3.1-8b', 'qwen3-8b'], got {models!r:.60}")
    if not models:
        raise SpecError("pack needs at least one model")
    hw = load_hardware(hardware)
    sized = []
    for m in models:
        profile, need = smallest_profile(m, hardware, precision=precision, headroom=headroom)
        compute, memory = slice_shares(hw, profile)
        sized.append((m, profile, need, compute, memory))
    gpus: list[list[Fraction]] = []  # used (compute, memory) per GPU
    placements = []
    for m, profile, need, compute, memory in sorted(sized, key=lambda s: (-s[4], -s[3])):
        for i, (c, mem) in enumerate(gpus):
            if c + compute <= 1 and mem + memory <= 1:
                gpus[i] = [c + compute, mem + memory]
                break
        else:
            gpus.append([compute, memory])
            i = len(gpus) - 1
        placements.append(Placement(m, i, profile, need))
    return Packing(hw.id, tuple(placements))
