"""Multi-Instance GPU slices as hardware views: ``h100-sxm:3g.40gb``.

A MIG GPU instance owns ``g`` of the GPU's 7 compute slices (its SMs, ``g/7``) and a
number of its 8 memory slices, each with its share of the memory controllers, DRAM and L2
cache; NVLink is not available to an instance [1]. So a view of profile ``p`` has

- memory: the profile's memory (``40gb`` of the name, as the guide states it);
- tensor FLOP/s: ``compute_slices / 7`` of the whole GPU's (``4/4`` devices such as the RTX
  PRO 6000 count their own slices);
- memory bandwidth and L2: the profile's share of the memory slices, ``memory / full
  memory`` rounded to the nearest slice (3g.40gb on an 80 GB H100: 4/8);
- scale-up: none (an instance cannot use NVLink or GPU peer-to-peer, so collectives
  between instances stage through host memory over PCIe), one GPU per domain;
- price: the larger of its compute and memory shares of the GPU-hour.

References
----------
.. [1] NVIDIA, "Multi-Instance GPU User Guide", Supported MIG Profiles: for A100-SXM4 (the
   H100 tables read alike) "MIG 3g.20gb | 4/8 | 3/7" (fraction of memory, fraction of
   SMs), and "MIG does not support ... GPU to GPU P2P (either PCIe or NVLink)".
   https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
"""

from __future__ import annotations

from fractions import Fraction

from ..errors import SpecError, UnknownNameError
from .figure import Figure
from .hardware import HardwareSpec, MigProfile, ScaleUp


def _full(hw: HardwareSpec) -> MigProfile:
    return max(hw.mig.profiles, key=lambda p: (p.compute_slices, p.memory.si))  # type: ignore[union-attr]


def slice_shares(hw: HardwareSpec, profile: str) -> tuple[Fraction, Fraction]:
    """``(compute share, memory share)`` of a MIG profile of ``hw``.

    Examples
    --------
    >>> from inferlab.specs.catalog import load_hardware
    >>> slice_shares(load_hardware("h100-sxm"), "3g.40gb")
    (Fraction(3, 7), Fraction(1, 2))
    """
    prof = _profile(hw, profile)
    full = _full(hw)
    memory_slices = 8 if full.compute_slices == 7 else full.compute_slices
    memory = Fraction(round(prof.memory.si / full.memory.si * memory_slices), memory_slices)
    return Fraction(prof.compute_slices, full.compute_slices), memory


def _profile(hw: HardwareSpec, profile: str) -> MigProfile:
    if hw.mig is None:
        raise SpecError(f"{hw.id} has no MIG profiles (MIG runs on A100, H100, H200, B200 class GPUs and "
                        f"the RTX PRO 6000); use a GPU from 'inferlab hardware list' that lists them")
    names = {p.name: p for p in hw.mig.profiles}
    key = profile.strip().lower()
    if key not in names:
        raise UnknownNameError(f"MIG profile of {hw.id}", profile, names)
    return names[key]


def _scaled(fig: Figure, share: Fraction, unit_label: str, why: str) -> Figure:
    value = fig.si * float(share)
    return Figure(si=value, unit=fig.unit, stated=f"{fig.stated} x {share}", source=fig.source,
                  note=f"{why} ({unit_label})")


def mig_view(hw: HardwareSpec, profile: str) -> HardwareSpec:
    """The hardware spec one MIG instance of ``profile`` sees.

    Raises
    ------
    SpecError
        ``hw`` has no MIG profiles.
    UnknownNameError
        ``profile`` is not one of them (with did-you-mean).
    """
    prof = _profile(hw, profile)
    compute, memory = slice_shares(hw, profile)
    sm = f"{compute} of the SMs"
    mem = f"{memory} of the memory slices"
    one = Figure(si=1.0, unit="dimensionless", stated="1", source=hw.mig.source,  # type: ignore[union-attr]
                 note="a MIG instance has no NVLink or GPU peer-to-peer")
    update = {
        "id": f"{hw.id}:{prof.name}",
        "name": f"{hw.name}, MIG {prof.name}",
        "memory_capacity": prof.memory,
        "usable_memory_capacity": prof.memory,
        "memory_bandwidth": _scaled(hw.memory_bandwidth, memory, mem, "MIG slice"),
        "flops": {p: _scaled(f, compute, sm, "MIG slice") for p, f in hw.flops.items()},
        "sparse_flops": {p: _scaled(f, compute, sm, "MIG slice") for p, f in hw.sparse_flops.items()},
        "achievable_flops": {p: _scaled(f, compute, sm, "MIG slice") for p, f in hw.achievable_flops.items()},
        "scale_up": ScaleUp(kind="none", topology="host", domain_size=one,
                            note="MIG instance: no NVLink or peer-to-peer; collectives stage through host memory"),
        "scale_out": None,
        "mig": None,
        "notes": (*hw.notes, f"MIG {prof.name} view of {hw.id}: {sm}, {mem}, {prof.memory.stated}"),
    }
    for name, share in (("l2_cache", memory), ("compute_units", compute), ("tdp", max(compute, memory)),
                        ("price", max(compute, memory))):
        fig = getattr(hw, name)
        if fig is not None:
            update[name] = _scaled(fig, share, f"{share} of the GPU", "MIG slice").model_copy(
                update={"as_of": fig.as_of})
    return hw.model_copy(update=update)
