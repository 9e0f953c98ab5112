"""The op trace's rotation work: the Hadamard transforms a recipe's rotations
(``RoleSpec.rotation``, :mod:`asicsim._src.numerics.rotation`) ask of a vector unit, as rows of kind
``elementwise`` with ``work = "rotation"`` beside the GEMM they feed.

What is counted: every GEMM (the forward one and, in a training trace, its ``grad-input`` and
``grad-weight`` GEMMs) that reads an operand in a role with a rotation of size ``b`` (the role as
that GEMM reads it: ``act``/``weight`` forward, ``grad_dx`` and ``<other>_dx`` for dX,
``<lhs>_dw`` and ``grad_dw`` for dW, each falling back as the recipe says) pays one fast
Walsh-Hadamard transform of that operand: ``elements x log2(b)`` additions and subtractions
(``log2 b`` butterfly stages of one addition or subtraction per element: Fino & Algazi,
"Unified matrix treatment of the fast Walsh-Hadamard transform", IEEE Trans. Computers 25(11),
1976, pp. 1142-1146; QuaRot, Ashkboos et al. 2024, arXiv:2404.00456, Section 3, runs its online
Hadamard transforms as such a kernel). The random sign flips are a sign-bit XOR and the
``1/sqrt(b)`` factor folds into the quantization scale the rounding multiplies by anyway: not
counted. A GEMM of two rotated operands needs no inverse (``(A R)(R^T B) = A B``): the
emulation's rotate-round-rotate-back is its numerical equivalent, so one transform per rotated
operand is what hardware does (an operand with no rotation of its own is not transformed; a
weight's forward rotation, which inference could fold into the stored weights offline as QuaRot
does, is counted on every call: training changes the weights every step).

The transform reads the operand as the quantizer does, just before the GEMM reads it: priced
on chip (the GEMM's own traffic already brings the operand in), in float32 (as the emulation
computes it, :mod:`asicsim._src.numerics.rotation`).
"""

from __future__ import annotations

import math

from asicsim._src.emulate.role_spec import ATTENTION_ROLES

ROTATION_WORK = "rotation"


def rotation_work(policy, roles, M: int, N: int, K: int) -> dict[str, list[tuple[str, int, int]]]:
    """The transforms of a GEMM ``M x K`` by ``K x N`` with operand ``roles`` under its
    ``policy``: per GEMM role (``forward``, ``grad-input``, ``grad-weight``), (operand role,
    elements, rotation size) of each operand whose role rotates."""
    def size(role):
        spec = policy.role(role)
        return None if spec is None else spec.rotation

    plain = tuple("act" if r in ATTENTION_ROLES else r for r in roles)  # the gradient GEMMs' names
    other, other_elements = (plain[1], K * N) if plain[0] == "act" else (plain[0], M * K)
    reads = {"forward": [(roles[0], M * K), (roles[1], K * N)],
             "grad-input": [("grad_dx", M * N), (f"{other}_dx", other_elements)]}
    if "weight" in plain:
        reads["grad-weight"] = [(f"{plain[0]}_dw", M * K), ("grad_dw", M * N)]
    return {gemm: [(r, n, size(r)) for r, n in ops if size(r) is not None] for gemm, ops in reads.items()}


def rotation_rows(entries, training: bool) -> list[dict]:
    """The rotation rows of the GEMM ``entries`` an op trace recorded (``rotations``, as
    :func:`rotation_work` gives them); gradient GEMMs' only with ``training``."""
    rows = []
    for e in entries:
        for gemm, ops in e.get("rotations", {}).items():
            if gemm != "forward" and not (training and e["backward"]):
                continue
            for role, n, b in ops:
                stages = int(math.log2(b))
                rows.append({"role": gemm, "kind": "elementwise", "M": n, "N": 1, "K": stages, "batch": e["batch"],
                             "count": e["count"], "lhs_role": role, "rhs_role": "", "format_lhs": "float32",
                             "format_rhs": "", "format_acc": "float32", "format_out": "float32",
                             "lhs_shape": (), "rhs_shape": (), "recipe": e["recipe"], "tensor_core": "", "macs": 0,
                             "work": ROTATION_WORK, "primitive": f"hadamard{b}", "elements_out": n, "inputs": 1,
                             "elements_in": n, "ops": stages})
    return rows
