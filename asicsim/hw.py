"""Hardware cost models: the physical model (:func:`cost`, :func:`cost_table`: one typed price over
designs and operations) of GEMM, conv, RNN and
elementwise operations; SCALE-Sim 3.0.0 compatibility: closed-form reports and its file readers.

Design specs (``designs/*.toml``): :class:`SystolicDesign`, :func:`load_design`, :func:`list_designs`.
GPU baseline (``designs/gpu_*.toml``, ``kind = "gpu"``): :class:`GpuDesign`, priced by the same
:func:`cost` / :func:`cost_many` (``asicsim._src.hw.gpu_cost``, ``asicsim._src.hw.gpu_model``). Every
front end returns one typed price (:class:`Price`, :class:`Bound`: ``asicsim._src.hw.result``) or
records that view it.

The names below are the supported surface; the modules behind them live in
``asicsim._src.hw`` and may change without notice.
"""

from asicsim._lazy import public_facade

public_facade(__name__, "asicsim._src.hw")
