"""Attention's operand roles: a model marks the operands of its two weightless GEMMs (the score
GEMM Q K^T and the output GEMM P V) with :func:`attention_role`, and the emulation rounds each as
the recipe's role ``query``, ``key``, ``probabilities`` or ``value`` says (absent: ``act``, so a
recipe without them gives the same bits as before).

The mark is :func:`jax.ad_checkpoint.checkpoint_name` with the name ``asicsim:<role>``: an
identity in plain JAX (jit, grad, remat policies see a named value), which the interpreter
(:mod:`asicsim._src.emulate.interpreter`) follows through value-preserving ops (reshapes,
transposes, slices, casts) and nested calls (``jit``) to the GEMM that reads it; not into the
body of a ``scan``, ``while`` or ``cond`` (mark the operands inside the body). A GEMM operand
that is a weight keeps role ``weight``; a mark on a weight does nothing.

This is how Transformer Engine and microxcaling give attention its own formats: TE's
``DotProductAttention`` under an FP8 recipe quantizes Q, K, V and the softmax output S (its
``fp8_dpa``/``fp8_mha`` options), microxcaling's ``MxSoftmax``/``mx_matmul`` calls take the two
matmuls' operands separately; here the model says which tensor is which, as AQT's per-einsum
configs do.

``scaling = "head"`` on these roles scales per index of the GEMM's batch axes: in attention,
``einsum("bqhd,bkhd->bhqk")`` batches over (sequence, head), so each head of each sequence has
its own scale (FlashAttention-3's fp8 ``q_descale``/``k_descale``/``v_descale`` are per
(batch, head) too).

>>> import jax.numpy as jnp
>>> from asicsim._src.emulate.attention import attention_role
>>> float(attention_role(jnp.float32(2.5), "query"))
2.5
"""

from __future__ import annotations

from jax.ad_checkpoint import checkpoint_name

from asicsim._src.emulate.policy import ATTENTION_ROLES

PREFIX = "asicsim:"


def attention_role(x, role: str):
    """``x`` marked as attention operand ``role`` (one of ``ATTENTION_ROLES``); its value unchanged."""
    if role not in ATTENTION_ROLES:
        raise ValueError(f"attention_role: role {role!r}; allowed: {list(ATTENTION_ROLES)}")
    return checkpoint_name(x, PREFIX + role)


def marked_role(eqn) -> str | None:
    """The attention role a ``name`` equation marks (None for any other equation or name)."""
    if eqn.primitive.name != "name":
        return None
    name = str(eqn.params.get("name", ""))
    role = name.removeprefix(PREFIX)
    return role if name.startswith(PREFIX) and role in ATTENTION_ROLES else None
