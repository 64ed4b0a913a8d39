"""Typed hardware specifications: one accelerator, per GPU (per chip for TPUs).

Loaded from ``hardware_specs/<id>.yaml``. Every numeric field is a :class:`Figure`
with its unit and source. Tensor throughput is stored **dense**; the vendor's 2:4
structured-sparsity headline is kept apart in ``sparse_flops`` and never used for
modelling.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import UnknownNameError
from .figure import Bandwidth, Bytes, Count, Figure, FlopRate, Frequency, Power, Price
from .source import Source

if TYPE_CHECKING:
    import pint

_STRICT = ConfigDict(frozen=True, extra="forbid")


class TensorPrecision(StrEnum):
    """Tensor-core input precisions a device may support (absent key = unsupported)."""

    FP64 = "fp64"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    FP6 = "fp6"
    FP4 = "fp4"
    INT4 = "int4"


class ScaleUp(BaseModel):
    """The scale-up fabric (NVLink/NVSwitch, Infinity Fabric, ICI, or PCIe only).

    ``bandwidth`` is per GPU, **per direction**, all links together (NVIDIA's headline
    figures sum both directions: H100 "900 GB/s" is 450 GB/s per direction).
    ``peer_bandwidth`` is the per-direction bandwidth to one peer on a point-to-point
    fabric (AMD XGMI: 64 GB/s per peer on MI300X, so TP=2 sees only that).
    """

    model_config = _STRICT

    kind: Literal["nvlink", "nvlink-bridge", "infinity-fabric", "ici", "pcie", "none"]
    generation: str | None = None
    topology: Literal["switched", "full-mesh", "torus", "pair", "pcie-switch", "host", "none"]
    bandwidth: Bandwidth | None = None
    peer_bandwidth: Bandwidth | None = None
    domain_size: Count
    note: str | None = None


class ScaleOut(BaseModel):
    """The scale-out network interface per GPU (InfiniBand / RoCE / Ethernet NIC)."""

    model_config = _STRICT

    nic: str
    bandwidth: Bandwidth = Field(description="Per GPU, per direction; stated in Gb/s as NICs are sold.")
    note: str | None = None

    @model_validator(mode="after")
    def _stated_in_bits(self) -> ScaleOut:
        # NICs are sold in Gb/s; a figure written in GB/s is the classic 8x mistake.
        if not any(name.endswith("bit") for name, _ in self.bandwidth.stated_quantity.unit_items()):
            raise ValueError(f"bandwidth {self.bandwidth.stated!r}: state NIC bandwidth in bits, e.g. '400 Gb/s'")
        return self


class Pcie(BaseModel):
    """Host PCIe link."""

    model_config = _STRICT

    generation: int = Field(ge=1, le=7)
    lanes: int = Field(ge=1, le=32)
    bandwidth: Bandwidth | None = Field(default=None, description="Per direction.")
    note: str | None = None


class MigProfile(BaseModel):
    """One Multi-Instance GPU profile (e.g. ``1g.10gb``)."""

    model_config = _STRICT

    name: str
    memory: Bytes
    compute_slices: int = Field(ge=1, le=8, description="GPU compute slices of the device's 7 (or 8).")
    max_instances: int = Field(ge=1, le=8)


class Mig(BaseModel):
    """Multi-Instance GPU partitioning offered by the device."""

    model_config = _STRICT

    source: str
    profiles: tuple[MigProfile, ...] = Field(min_length=1)


class HardwareSpec(BaseModel):
    """One accelerator model, per GPU (per chip for TPUs).

    Attributes
    ----------
    memory_capacity : Figure [B]
        Device memory as the vendor labels it (GB or GiB, exactly as the source says).
    usable_memory_capacity : Figure [B]
        Memory a process can see (nvidia-smi total where known).
    memory_bandwidth : Figure [B/s]
        Peak DRAM bandwidth (decimal TB/s).
    flops : dict of TensorPrecision to Figure [FLOP/s]
        **Dense** tensor throughput per input precision; INT rates in OP/s.
    sparse_flops : dict of TensorPrecision to Figure [FLOP/s]
        The vendor's 2:4 structured-sparsity headline, for reference only.
    achievable_flops : dict of TensorPrecision to Figure [FLOP/s]
        The vendor's own measurement of the fastest dense GEMM the part sustains (AMD's
        "max-achievable FLOPs": the best GEMM shape at the clock the part holds under load,
        below the boost clock the datasheet peak assumes), where one is published. No
        tensor-core op is timed faster (:func:`inferlab.core.timing.time_op`): the efficiency
        fractions fitted on other GPUs' kernels would otherwise carry their vendor's share of
        peak over to this one.
    """

    model_config = _STRICT

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*[a-z0-9]$")
    name: str
    vendor: Literal["NVIDIA", "AMD", "Google", "Apple", "Intel", "Qualcomm"]
    architecture: str
    form_factor: str
    kind: Literal["gpu", "cpu", "phone-soc"] = Field(default="gpu", description=(
        "What runs the model: an accelerator (GPU, TPU, an Apple GPU); a server or desktop CPU "
        "(its DRAM channels and SIMD units); a phone-class SoC, whose CPU cores run llama.cpp's and "
        "ExecuTorch's default Android backends."))
    status: Literal["shipping", "announced"]
    sources: dict[str, Source] = Field(min_length=1)

    memory_type: str
    memory_capacity: Bytes
    usable_memory_capacity: Bytes
    memory_bandwidth: Bandwidth
    flops: dict[TensorPrecision, FlopRate] = Field(min_length=1)
    sparse_flops: dict[TensorPrecision, FlopRate] = Field(default_factory=dict)
    achievable_flops: dict[TensorPrecision, FlopRate] = Field(default_factory=dict)
    scale_up: ScaleUp
    scale_out: ScaleOut | None = None
    pcie: Pcie | None = None
    tdp: Power | None = None
    l2_cache: Bytes | None = None
    last_level_cache: Bytes | None = Field(default=None, description="Memory-side cache (AMD Infinity Cache).")
    compute_units: Count | None = Field(default=None, description="SMs (NVIDIA), CUs (AMD), TensorCores (TPU).")
    boost_clock: Frequency | None = None
    price: Price | None = Field(default=None, description="Default on-demand USD per GPU-hour; needs as_of.")
    mig: Mig | None = None
    tensor_rates_like: str | None = Field(default=None, description=(
        "Catalog id of a GPU of the same architecture whose published tensor rates, as ratios to one "
        "this spec lists, give the rates this one does not list (Rubin CPX, which publishes only "
        "NVFP4, takes Rubin's); None: an unlisted rate is derived from operand widths."))
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check_consistency(self) -> HardwareSpec:
        for path, fig in self.figures():
            if fig.source not in self.sources:
                raise ValueError(
                    f"{path}: source {fig.source!r} is not defined in 'sources' "
                    f"(defined: {', '.join(sorted(self.sources))})"
                )
            for alt in fig.alternatives:
                if alt.source not in self.sources:
                    raise ValueError(f"{path}: alternative source {alt.source!r} is not defined in 'sources'")
        if self.mig is not None and self.mig.source not in self.sources:
            raise ValueError(f"mig: source {self.mig.source!r} is not defined in 'sources'")
        if self.usable_memory_capacity.si > self.memory_capacity.si * 1.1:
            raise ValueError(
                f"usable_memory_capacity {self.usable_memory_capacity} exceeds memory_capacity "
                f"{self.memory_capacity} by more than 10%; check GB vs GiB"
            )
        if self.price is not None and not self.price.as_of:
            raise ValueError("price: 'as_of' (the date of the price source) is required")
        for prec, reached in self.achievable_flops.items():
            dense = self.flops.get(prec)
            if dense is None or not 0 < reached.si <= dense.si:
                raise ValueError(f"achievable_flops.{prec}: {reached} must be above zero with a dense peak at or "
                                 f"above it in flops (got {dense}); a measured rate cannot beat the datasheet's")
        for prec, sparse in self.sparse_flops.items():
            dense = self.flops.get(prec)
            if dense is not None and sparse.si <= dense.si:
                raise ValueError(
                    f"sparse_flops.{prec}: {sparse} is not above the dense figure {dense}; "
                    "flops holds dense rates, sparse_flops the 2:4-sparsity headline"
                )
        return self

    def figures(self) -> list[tuple[str, Figure]]:
        """Every sourced figure with its dotted path, e.g. ``("flops.bf16", Figure)``."""
        return list(_walk_figures(self, ""))

    def peak_flops(self, precision: str) -> pint.Quantity:
        """Dense peak tensor throughput at ``precision`` [FLOP/s].

        Raises
        ------
        UnknownNameError
            If the device has no tensor support for ``precision``.
        """
        fig = self.flops.get(precision)  # type: ignore[call-overload]
        if fig is None:
            raise UnknownNameError(f"tensor precision on {self.id}", str(precision), [str(p) for p in self.flops])
        return fig.quantity

    def ridge_point(self, precision: str = "bf16") -> pint.Quantity:
        """Arithmetic intensity where compute and memory time are equal [FLOP/B].

        Notes
        -----
        ``ridge = peak_flops(precision) / memory_bandwidth``; an op with a lower
        intensity (FLOP per byte moved) is memory-bound on this device.
        """
        return (self.peak_flops(precision) / self.memory_bandwidth.quantity).to("flop/byte")

    @property
    def tiled_matrix_units(self) -> bool:
        """GEMMs run on matrix units that work in tiles of rows (NVIDIA tensor cores, AMD
        matrix cores, TPU systolic arrays), so a few rows cost a padded tile. Apple's GPUs have
        none (16-bit math on the FP32 ALUs; Metal's simdgroup matrices are 8 x 8), and at a
        few rows their engines run matrix-vector kernels that compute only the rows there are;
        neither do CPUs (SIMD vectors)."""
        return self.vendor != "Apple" and self.kind == "gpu"

    @property
    def device_word(self) -> str:
        """What one unit of this hardware is called in tables: ``GPU`` (accelerators, TPUs and
        Apple GPUs included), ``CPU`` or ``SoC`` (a phone's)."""
        return {"cpu": "CPU", "phone-soc": "SoC"}.get(self.kind, "GPU")

    @property
    def supported_precisions(self) -> tuple[str, ...]:
        """Tensor precisions with a dense throughput figure."""
        return tuple(str(p) for p in self.flops)

    def _repr_html_(self) -> str:
        from .render import hardware_html

        return hardware_html(self)


def _walk_figures(obj: object, prefix: str):
    if isinstance(obj, Figure):
        yield prefix, obj
    elif isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            yield from _walk_figures(getattr(obj, name), f"{prefix}.{name}" if prefix else name)
    elif isinstance(obj, dict):
        for key, val in obj.items():
            yield from _walk_figures(val, f"{prefix}.{key}")
    elif isinstance(obj, tuple):
        for i, val in enumerate(obj):
            yield from _walk_figures(val, f"{prefix}[{i}]")



