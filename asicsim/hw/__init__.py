"""Hardware cost models: the physical model (:func:`cost`, :func:`cost_table`) of GEMM, conv, RNN and
elementwise operations; SCALE-Sim 3.0.0 compatibility: closed-form reports and its file readers.

Design specs (``designs/*.toml``): :class:`SystolicDesign`, :func:`load_design`, :func:`list_designs`.
GPU baseline (``designs/gpu_*.toml``, ``kind = "gpu"``): :class:`GpuDesign`, priced by the same
:func:`cost` / :func:`cost_many` (:mod:`asicsim.hw.gpu_cost`, :mod:`asicsim.hw.gpu_model`).
"""

from asicsim.hw.cost import (
    CostResult,
    cost,
    cost_many,
    cost_table,
    parse_formats,
    topology_operations,
)
from asicsim.hw.design import (
    ArraySpec,
    BufferSpec,
    DesignError,
    DramSpec,
    PESpec,
    SystolicDesign,
    VectorUnitSpec,
)
from asicsim.hw.design_files import designs_dir, list_designs, load_design
from asicsim.hw.energy import (
    Energy,
    adder_energy_pj,
    design_energy_table,
    dram_energy_pj_per_bit,
    mac_energy_pj,
    multiplier_energy_pj,
    node_scale,
    sram_access_energy_pj,
    sram_energy_pj_per_bit,
)
from asicsim.hw.gpu import GpuDesign, PrecisionPath, precision_path
from asicsim.hw.gpu_cost import gpu_cost_many
from asicsim.hw.operations import AllReduce, Conv, Elementwise, Gemm, OperationError, Rnn
from asicsim.hw.scalesim_compat import (
    REPORT_COLUMNS,
    scalesim_arrays,
    scalesim_report,
    scalesim_report_from_files,
)
from asicsim.hw.scalesim_files import (
    ScaleSimConfig,
    ScaleSimFileError,
    Topology,
    read_scalesim_config,
    read_scalesim_topology,
)
from asicsim.hw.sweep import BOUNDS, gemm_sweep

__all__ = [
    "BOUNDS",
    "REPORT_COLUMNS",
    "AllReduce",
    "ArraySpec",
    "BufferSpec",
    "Conv",
    "CostResult",
    "DesignError",
    "DramSpec",
    "Elementwise",
    "Energy",
    "Gemm",
    "GpuDesign",
    "OperationError",
    "PESpec",
    "PrecisionPath",
    "Rnn",
    "ScaleSimConfig",
    "ScaleSimFileError",
    "SystolicDesign",
    "Topology",
    "VectorUnitSpec",
    "adder_energy_pj",
    "cost",
    "cost_many",
    "cost_table",
    "design_energy_table",
    "designs_dir",
    "dram_energy_pj_per_bit",
    "gemm_sweep",
    "gpu_cost_many",
    "list_designs",
    "load_design",
    "mac_energy_pj",
    "multiplier_energy_pj",
    "node_scale",
    "parse_formats",
    "precision_path",
    "read_scalesim_config",
    "read_scalesim_topology",
    "scalesim_arrays",
    "scalesim_report",
    "scalesim_report_from_files",
    "sram_access_energy_pj",
    "sram_energy_pj_per_bit",
    "topology_operations",
]
