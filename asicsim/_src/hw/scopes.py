"""The scopes a design's power and energy are given at (issue 30's record schema), in one place.

``core``: the array, vector unit and on-chip buffers; ``chip``: core + clock, network, control,
DRAM controller and PHY, host interface; ``board``: chip + DRAM devices + voltage regulators
(:mod:`asicsim._src.hw.power` prices each). A GPU is measured as a board (what ``nvidia-smi``
reports), so ``board`` is the default scope of a comparison. Light: no numpy, so the CLI's
parser can offer the choices without importing the model.
"""

SCOPES = ("core", "chip", "board")
#: A record's energy keys per scope: the total and its dynamic part (``energy_<scope>_j``,
#: ``energy_dynamic_<scope>_j``); they add up over operations, powers do not.
SCOPE_ENERGY_KEYS = tuple(f"energy_{k}{s}_j" for k in ("", "dynamic_") for s in SCOPES)
#: The scope a comparison is made at unless one is asked for: a GPU is measured as a board.
DEFAULT_SCOPE = "board"
