"""The jax APIs that changed inside the supported range (pyproject.toml's jax bounds), in one
place, each read from jax's own source for the versions on either side of the change."""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import ml_dtypes

# ``jax.enable_x64`` (a context manager) is public from jax 0.8; before, it lived in
# jax.experimental, which dropped it in 0.10.
enable_x64 = (jax.enable_x64 if hasattr(jax, "enable_x64")
              else importlib.import_module("jax.experimental").enable_x64)


def is_floating(dtype) -> bool:
    """Whether ``dtype`` is a floating-point type, ml_dtypes' narrow floats included: jax 0.8
    does not count float6_e2m3fn/e3m2fn as ``jnp.floating`` (later jax does). Complex types are
    not (``ml_dtypes.finfo`` accepts them, as ``np.finfo`` does: that of their real part)."""
    if jnp.issubdtype(dtype, jnp.floating):
        return True
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return False
    try:
        ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return False
    return True


def bind_args(primitive, params: dict) -> tuple[tuple, dict]:
    """(subfuns, params) to re-bind ``primitive`` as ``jax.core.eval_jaxpr`` does:
    ``get_bind_params`` returns that pair up to jax 0.9.1 and the params alone from 0.9.2."""
    bound = primitive.get_bind_params(params)
    return bound if isinstance(bound, tuple) else ((), bound)


def subfuns(primitive, params: dict) -> tuple:
    """The functions a call primitive binds with (a custom_vjp_call's (fun, fwd, bwd), a
    custom_jvp_call's (fun, jvp)): beside the params up to jax 0.9.1, inside them as
    ``subfuns`` from 0.9.2."""
    funs, bound = bind_args(primitive, params)
    return funs or bound["subfuns"]


def scan_operand_counts(params: dict) -> tuple[int, int]:
    """(consts, carry) operand counts of a ``scan`` equation.

    jax <= 0.10 names them (``num_consts``, ``num_carry``); jax 0.11 dropped both (and ``linear``)
    for ``ft_in``/``ft_out``, FlatTrees whose groups are (consts, carry, xs) and (carry, ys)
    (``jax/_src/lax/control_flow/loops.py``: ``scan_p.bind(..., ft_in=ft.pack((consts, carry,
    xs)), ...)``). In both, the body's outputs are the carry and then the ys it keeps."""
    if "ft_in" in params:
        consts, carry, _ = params["ft_in"].unpack()
        return len(consts), len(carry)
    return params["num_consts"], params["num_carry"]
