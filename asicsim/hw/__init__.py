"""Hardware cost models. SCALE-Sim 3.0.0 compatibility: closed-form reports and its file readers."""

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
    "ScaleSimConfig",
    "ScaleSimFileError",
    "Topology",
    "read_scalesim_config",
    "read_scalesim_topology",
    "scalesim_arrays",
    "scalesim_report",
    "scalesim_report_from_files",
]
