"""Hardware cost models: the physical model (:func:`cost`, :func:`cost_table`: one typed price over
designs and operations) of GEMM, conv, RNN and
elementwise operations; SCALE-Sim 3.0.0 compatibility: closed-form reports and its file readers.

Design specs (``designs/*.toml``): :class:`SystolicDesign`, :func:`load_design`, :func:`list_designs`.
GPU baseline (``designs/gpu_*.toml``, ``kind = "gpu"``): :class:`GpuDesign`, priced by the same
:func:`cost` / :func:`cost_many` (:mod:`asicsim._src.hw.gpu_cost`, :mod:`asicsim._src.hw.gpu_model`). Every
front end returns one typed price (:class:`Price`, :class:`Bound`: :mod:`asicsim._src.hw.result`) or
records that view it.
"""

from asicsim._lazy import lazy_package

lazy_package(__name__, {
    ".family": ["cost_family", "family_key"],
    ".cost": ["CostResult", "cost", "cost_many", "parse_formats", "topology_operations"],
    ".cost_tables": ["cost_table"],
    ".design": ["ArraySpec", "BufferSpec", "DesignError", "DramSpec", "PESpec", "SystolicDesign",
        "VectorUnitSpec"],
    ".design_files": ["designs_dir", "list_designs", "load_design"],
    ".efficiency": ["energy_per_mac_pj", "peak_tops_per_w"],
    ".energy": ["Energy", "adder_energy_pj", "dram_energy_pj_per_bit",
        "mac_energy_pj", "multiplier_energy_pj", "node_scale", "sram_access_energy_pj",
        "sram_energy_pj_per_bit"],
    ".energy_table": ["design_energy_table"],
    ".gpu": ["GpuDesign", "PrecisionPath", "precision_path"],
    ".gpu_cost": ["gpu_cost_many", "gpu_price"],
    ".power_spec": ["PowerSpec"],
    ".operations": ["AllReduce", "Conv", "Elementwise", "Gemm", "OperationError", "Rnn"],
    ".scalesim_compat": ["REPORT_COLUMNS", "scalesim_arrays", "scalesim_report",
        "scalesim_report_from_files"],
    ".scalesim_files": ["ScaleSimConfig", "ScaleSimFileError", "Topology", "read_scalesim_config",
        "read_scalesim_topology"],
    ".result": ["Bound", "Price"],
    ".sweep": ["BOUNDS", "gemm_sweep"],
})

__all__ = [
    "BOUNDS",
    "REPORT_COLUMNS",
    "AllReduce",
    "ArraySpec",
    "Bound",
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
    "PowerSpec",
    "PrecisionPath",
    "Price",
    "Rnn",
    "ScaleSimConfig",
    "ScaleSimFileError",
    "SystolicDesign",
    "Topology",
    "VectorUnitSpec",
    "adder_energy_pj",
    "cost",
    "cost_family",
    "cost_many",
    "cost_table",
    "design_energy_table",
    "designs_dir",
    "dram_energy_pj_per_bit",
    "energy_per_mac_pj",
    "family_key",
    "gemm_sweep",
    "gpu_cost_many",
    "gpu_price",
    "list_designs",
    "load_design",
    "mac_energy_pj",
    "multiplier_energy_pj",
    "node_scale",
    "parse_formats",
    "peak_tops_per_w",
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
