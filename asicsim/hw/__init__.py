"""Hardware cost models. SCALE-Sim 3.0.0 compatibility: closed-form reports and its file readers.

Design specs (``designs/*.toml``): :class:`SystolicDesign`, :func:`load_design`, :func:`list_designs`.
"""

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

__all__ = [
    "REPORT_COLUMNS",
    "ArraySpec",
    "BufferSpec",
    "DesignError",
    "DramSpec",
    "PESpec",
    "ScaleSimConfig",
    "ScaleSimFileError",
    "SystolicDesign",
    "Topology",
    "VectorUnitSpec",
    "designs_dir",
    "list_designs",
    "load_design",
    "read_scalesim_config",
    "read_scalesim_topology",
    "scalesim_arrays",
    "scalesim_report",
    "scalesim_report_from_files",
]
