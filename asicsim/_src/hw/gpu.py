"""GPU designs (``designs/gpu_*.toml``, ``kind = "gpu"``): a frozen, validated spec and its
precision paths.

A :class:`GpuDesign` holds the datasheet: per-precision dense peaks, memory bandwidth and capacity,
L2 size, SM count, boost clock, TDP and process node, plus the library path the DeepBench-era
libraries took for int8 and optional per-design efficiency overrides. Every figure in the shipped
files names its source (NVIDIA datasheets and architecture whitepapers, as in
``data/gpus.csv``). The cost model is :mod:`asicsim._src.hw.gpu_model`; its fitted constants
are ``asicsim/_src/hw/data/gpu_fit.toml``.

Formats (roles ``act``/``weight``/``acc``/``out``; default fp32, int32 accumulation for integer
operands) pick a *precision path* (:mod:`asicsim._src.hw.gpu_paths`): a path exists when the datasheet
gives its peak (fp32 SIMT, TF32/FP16/BF16/FP8/INT8 tensor cores, half2, DP4A, MX FP8 on Blackwell),
plus cuBLAS's fp32-math path for fp16, bf16 and int8 storage on every chip. Formats no path reads
(fp8 on a chip without FP8 tensor cores, integers wider than 8 bits, MX blocks before Blackwell)
raise unless ``emulate=S`` states a slowdown, as on a systolic design.
"""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.hw import limits as lim
from asicsim._src.hw.design_checks import DesignError as DesignError
from asicsim._src.hw.design_checks import (
    Problem,
    choice,
    flag,
    in_range,
    own_fields,
    raise_if,
    text,
)
from asicsim._src.hw.gpu_paths import K_ALIGN as K_ALIGN
from asicsim._src.hw.gpu_paths import PATH_ALIGN as PATH_ALIGN
from asicsim._src.hw.gpu_paths import PrecisionPath as PrecisionPath
from asicsim._src.hw.gpu_paths import precision_path as precision_path
from asicsim._src.hw.operations import OperationError
from asicsim._src.hw.roles import parse_formats
from asicsim._src.numerics import get_format
from asicsim._src.numerics.formats import IntFormat
from asicsim._src.numerics.mac import PRESETS

INT8_PATHS = ("dp4a", "tensor")
#: Memory kinds a GPU design may name, and the DRAM energy row (asicsim._src.hw.energy) each is priced at.
GPU_MEM_TYPES = {"GDDR5": "GDDR5", "GDDR5X": "GDDR5", "GDDR6": "GDDR6", "GDDR6X": "GDDR6X",
                 "HBM2": "HBM2", "HBM2E": "HBM2E", "HBM3": "HBM3", "HBM3E": "HBM3E"}
@dataclass(frozen=True, kw_only=True)
class GpuDesign:
    """One GPU: datasheet numbers with units in the names; hashable and frozen like SystolicDesign."""

    name: str
    kind: str = "gpu"
    description: str = ""
    source: str = ""
    variant: str = ""
    architecture: str = ""
    launch_year: int | None = None
    process_nm: float
    process_name: str = ""
    sm_count: int
    boost_clock_mhz: float
    tdp_w: float
    fp32_tflops: float
    tf32_tflops: float | None = None
    fp16_tensor_tflops: float | None = None  # fp16 multiply, fp16 or fp32 accumulate, dense
    bf16_tensor: bool = False  # bf16 runs on the tensor cores at the fp16 rate (Ampere and later)
    fp16_nontensor_tflops: float | None = None  # half2 SIMT rate (P100); None: no fast fp16
    fp8_tflops: float | None = None
    int8_tops: float | None = None  # tensor-core (or marketed DP4A) int8 rate
    int8_path: str | None = None  # "dp4a" | "tensor"; None: no int8 dot product
    mxfp8_tensor: bool = False  # OCP MX FP8 blocks on the tensor cores at the fp8 rate (Blackwell)
    mem_type: str
    bandwidth_gbps: float
    copy_bandwidth_gbps: float | None = None  # published device-to-device copy rate (achievable)
    capacity_gib: float
    l2_mib: float
    mac_preset: str = ""  # asicsim MacSpec preset of the tensor cores ("v100", "a100", "h100")
    # achievable fraction of the datasheet peak per efficiency class; None: the shared fitted value
    eff_simt: float | None = None
    eff_dp4a: float | None = None
    eff_tensor: float | None = None

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        text(out, v, "name", nonempty=True)
        if "kind" in v and v["kind"] != "gpu":
            out.append(("kind", v["kind"], "'gpu'"))
        for k in ("description", "source", "variant", "architecture", "process_name"):
            text(out, v, k)
        in_range(out, v, "launch_year", lim.LAUNCH_YEAR, optional=True)
        in_range(out, v, "sm_count", lim.SM_COUNT)
        for k, limit in (("process_nm", lim.NODE_NM), ("boost_clock_mhz", lim.CLOCK_MHZ),
                         ("tdp_w", lim.TDP_W), ("fp32_tflops", lim.TERA_OPS),
                         ("bandwidth_gbps", lim.DRAM_GBPS), ("capacity_gib", lim.DRAM_GIB),
                         ("l2_mib", lim.L2_MIB)):
            in_range(out, v, k, limit)
        in_range(out, v, "copy_bandwidth_gbps", lim.DRAM_GBPS, optional=True)
        copy, peak = v.get("copy_bandwidth_gbps"), v.get("bandwidth_gbps")
        if isinstance(copy, int | float) and isinstance(peak, int | float) and copy > peak:
            out.append(("copy_bandwidth_gbps", copy, f"at most bandwidth_gbps ({peak:g}): a measured "
                                                     "copy rate cannot beat the datasheet"))
        for k in ("tf32_tflops", "fp16_tensor_tflops", "fp16_nontensor_tflops", "fp8_tflops",
                  "int8_tops"):
            in_range(out, v, k, lim.TERA_OPS, optional=True)
        flag(out, v, "bf16_tensor")
        if "bf16_tensor" in v and v["bf16_tensor"] is True and v.get("fp16_tensor_tflops") is None:
            out.append(("bf16_tensor", True, "false unless fp16_tensor_tflops is given"))
        if "int8_path" in v and v["int8_path"] is not None and v["int8_path"] not in INT8_PATHS:
            out.append(("int8_path", v["int8_path"], " | ".join(repr(p) for p in INT8_PATHS)
                        + " (or omitted: no int8 dot product)"))
        flag(out, v, "mxfp8_tensor")
        if v.get("mxfp8_tensor") is True and v.get("fp8_tflops") is None:
            out.append(("mxfp8_tensor", True, "false unless fp8_tflops is given (MX FP8 runs at the fp8 rate)"))
        if v.get("int8_path") == "tensor" and v.get("int8_tops") is None:
            out.append(("int8_path", "tensor", "'dp4a' or omitted unless int8_tops is given"))
        choice(out, v, "mem_type", GPU_MEM_TYPES, " | ".join(GPU_MEM_TYPES))
        choice(out, v, "mac_preset", ("", *PRESETS), f"'' (no tensor cores) or one of {list(PRESETS)}")
        for k in ("eff_simt", "eff_dp4a", "eff_tensor"):  # omitted: the shared fitted value
            in_range(out, v, k, lim.EFFICIENCY, optional=True)
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))

    # --- derived numbers -------------------------------------------------------------------
    @property
    def clock_mhz(self) -> float:
        return self.boost_clock_mhz

    @property
    def clock_hz(self) -> float:
        return self.boost_clock_mhz * 1e6

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gbps * 1e9

    @property
    def l2_bytes(self) -> float:
        return self.l2_mib * 2**20

    @property
    def peak_tops(self) -> float:
        """The fastest dense peak the chip has (any precision), in 1e12 ops/s."""
        return max(x for x in (self.fp32_tflops, self.tf32_tflops, self.fp16_tensor_tflops,
                               self.fp16_nontensor_tflops, self.fp8_tflops, self.int8_tops) if x)

    def mac_spec(self):
        """The tensor cores' MAC numerics as an :class:`asicsim.MacSpec` (None: no preset)."""
        from asicsim._src.numerics.mac import MacSpec
        return MacSpec.parse(self.mac_preset) if self.mac_preset else None

    # --- the design interface (asicsim._src.hw.interface.Design) ---------------------------------
    def peak_ops_per_s(self, formats=None) -> float:
        """The datasheet dense peak of the precision path ``formats`` take (fp32 when none); NaN
        for formats the chip does not execute (pricing them is the error that names its paths)."""
        try:
            return precision_path(self, resolve_gpu_formats(self, formats),
                                  parse_formats(formats).get("emulate")).peak_ops_per_s
        except OperationError:
            return float("nan")

    @property
    def dram_bytes_per_s(self) -> float:
        return self.bandwidth_bytes_per_s

    @property
    def power_w(self) -> float:
        """The datasheet TDP (board power)."""
        return float(self.tdp_w)

    @property
    def has_vector_unit(self) -> bool:
        """Elementwise work runs on the SIMT cores."""
        return True

    def weight_buffer(self) -> None:
        """None: the L2 is a cache the model does not schedule, not a weight buffer."""
        return None

    def with_weight_buffer(self, capacity_kib: float) -> GpuDesign:
        raise DesignError([("buffers", "<none>", "a design with a weight buffer (a systolic design); "
                                                 "a GPU's L2 is a cache the model does not schedule")],
                          self.name)


def default_formats() -> dict:
    """A GPU's formats when none are given: fp32 for every role (what DeepBench's fp32 rows ran)."""
    f = get_format("fp32")
    return {"act": f, "weight": f, "acc": f, "out": f}


def resolve_gpu_formats(design: GpuDesign, formats=None) -> dict:
    """Format specs per role for a GPU: fp32 unless given (the accumulator of integer operands:
    int32, as cuBLAS's integer GEMM); ``out`` defaults to ``act``."""
    given = parse_formats(formats)  # an ``emulate`` key is read by precision_path
    f = default_formats()
    f = {r: get_format(given[r]) if r in given else v for r, v in f.items() if r != "out"}
    if "acc" not in given and all(isinstance(f[r], IntFormat) for r in ("act", "weight")):
        f["acc"] = get_format("int32")
    f["out"] = get_format(given["out"]) if "out" in given else f["act"]
    return f


def gpu_design_from_table(table: dict, source: str = "<table>") -> GpuDesign:
    """Build a GPU design from a parsed TOML table; every problem (unknown or missing keys, bad
    values) in one :class:`DesignError` with the file name."""
    import dataclasses

    fields = dataclasses.fields(GpuDesign)
    names = {f.name for f in fields}
    required = {f.name for f in fields if f.default is dataclasses.MISSING}
    out: list[Problem] = []
    for key, value in table.items():
        if key not in names:
            out.append((key, value, f"no such field of a GPU design; fields are {sorted(names)}"))
    given = {k: v for k, v in table.items() if k in names}
    out.extend((k, "<missing>", "a value (required)") for k in sorted(required - set(given)))
    out.extend(GpuDesign.problems(given))
    if out:
        raise DesignError(out, source)
    return GpuDesign(**given)
