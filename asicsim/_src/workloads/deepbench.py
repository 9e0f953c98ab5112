"""DeepBench's kernel lists as workloads: load a suite, turn its rows into operations, price them.

>>> from asicsim._src.workloads import load_suite, suite_costs
>>> s = load_suite("deepbench_gemm_train")
>>> s.kind, len(s.shapes), s.operations()[0]
('gemm', 160, Gemm(M=1760, N=16, K=1760, weight_sparsity=0.0, sparse_format='dense', a_transposed=False, b_transposed=False, name='', kind='gemm'))

The suites are ``workloads/deepbench_<kind>_<set>.csv`` (``scripts/make_deepbench_workloads.py``
writes them from the tidy copies in ``data/deepbench/``, whose README documents every
column). A user's CSV written the same way works wherever a suite name does; its kind is told by
its columns. How each DeepBench row becomes an asicsim operation:

- ``gemm``: ``Gemm(M, N, K, a_transposed, b_transposed)``; DeepBench's ``flops`` = 2MNK.
- ``conv`` (NCHW; W = input width, H = input height, C in, K out channels, N batch, R = filter
  height, S = filter width): ``Conv(in_h=H, in_w=W, in_channels=C, out_channels=K, kernel_h=R,
  kernel_w=S, stride=stride_h, stride_w=stride_w, padding=pad_h, padding_w=pad_w, batch=N)``; its
  ``out_h``/``out_w`` are DeepBench's ``P_out_h``/``Q_out_w`` (checked on load when the file has
  them), ``flops_fwd`` = 2 N K C R S P Q = 2 x the lowered GEMM's MACs.
- ``rnn``: :class:`RecurrentRnn`, the recurrent part only: DeepBench calls cuDNN with
  ``CUDNN_SKIP_INPUT`` (no input projection W x), so its ``flops_fwd`` = 2 gates hidden^2 batch
  timesteps counts the ``timesteps`` recurrent GEMMs alone; the gate nonlinearities run on the
  design's vector unit (a design without one, e.g. the SCALE-Sim designs, prices the GEMMs only and
  says so in the ``note`` column). GPU designs price them without the input projection too (the
  GPU model's ``rnn_skip_input``, which :func:`asicsim.hw.cost_many` picks for such a lowering);
  a model that still counts other work than DeepBench gets a ``note`` saying by how much its flop
  count differs.
- ``sparse_gemm``: DeepBench's sparse operand is A (M x K, ``nnz_A`` nonzeros) times a dense B
  (K x N); asicsim's :class:`~asicsim._src.hw.operations.Gemm` puts sparsity on its weight operand B.
  The problem is transposed, ``C^T (N x M) = B^T (N x K) @ A^T (K x M)``, so the sparse matrix is
  the weight: ``Gemm(M=N, N=M, K=K, weight_sparsity=sparsity, sparse_format="csr")`` (DeepBench
  runs cuSPARSE CSR; every DeepBench sparse kernel is NN, and the layout flags, which the
  transposed problem would flip, stay in the shape columns only). Same MACs, same operands; ``tflops`` uses DeepBench's useful count
  ``sparse_useful_flops`` = 2 nnz_A N (``tops`` is the dense-equivalent 2MNK / time).
- ``allreduce``: ``AllReduce(elements=size_floats, ranks)`` (fp32, 32 bits per element); priced
  by the multi-chip ring model (:func:`asicsim._src.hw.links.allreduce_time`) on a link topology.

This module is where the suite names are imported from; the files are read in
:mod:`~asicsim._src.workloads.deepbench_files`, a suite is loaded in :mod:`~asicsim._src.workloads.deepbench_suite`
and priced in :mod:`~asicsim._src.workloads.deepbench_price`.
"""

from __future__ import annotations

from asicsim._src.workloads.deepbench_files import FLOPS_COLUMN as FLOPS_COLUMN
from asicsim._src.workloads.deepbench_files import PRECISIONS as PRECISIONS
from asicsim._src.workloads.deepbench_files import RNN_TYPES as RNN_TYPES
from asicsim._src.workloads.deepbench_files import SHAPE_COLUMNS as SHAPE_COLUMNS
from asicsim._src.workloads.deepbench_files import list_suites as list_suites
from asicsim._src.workloads.deepbench_files import suite_rows as suite_rows
from asicsim._src.workloads.deepbench_files import workloads_dir as workloads_dir
from asicsim._src.workloads.deepbench_price import SCOPED_COLUMNS as SCOPED_COLUMNS
from asicsim._src.workloads.deepbench_price import kernel_table as kernel_table
from asicsim._src.workloads.deepbench_price import suite_costs as suite_costs
from asicsim._src.workloads.deepbench_suite import RecurrentRnn as RecurrentRnn
from asicsim._src.workloads.deepbench_suite import Suite as Suite
from asicsim._src.workloads.deepbench_suite import load_suite as load_suite
from asicsim._src.workloads.deepbench_suite import suites_table as suites_table
from asicsim._src.workloads.errors import WorkloadError as WorkloadError
