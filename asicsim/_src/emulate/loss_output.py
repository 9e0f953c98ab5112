"""What a training step's loss function returned: the loss (a float scalar) and, with
``has_aux``, its auxiliary output, or a TypeError that says what it returned and what is expected
(:func:`split_loss`, used by :func:`asicsim._src.emulate.training.make_train_step`)."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["split_loss"]


def split_loss(out, has_aux: bool, name: str = "loss_fn"):
    """``(loss, aux)`` from what ``loss_fn`` returned (aux None without ``has_aux``), or a
    TypeError naming what it returned and what ``make_train_step`` expects: a float scalar loss,
    with ``has_aux=True`` a pair ``(loss, aux)``."""
    pair = isinstance(out, (tuple, list))
    if has_aux and not (pair and len(out) == 2):
        hint = (" (a loss alone: pass has_aux=False, the default)" if not pair else
                " (put everything but the loss in aux: (loss, (a, b)) or (loss, {...}))")
        raise TypeError(f"make_train_step(..., has_aux=True): {name} must return a pair (loss, aux); "
                        f"it returned {_describe(out)}{hint}")
    if not has_aux and pair:
        raise TypeError(f"make_train_step: {name} returned {_describe(out)}, not a scalar loss; for a "
                        "loss_fn(params, batch) -> (loss, aux) pass make_train_step(..., has_aux=True)")
    loss, aux = out if has_aux else (out, None)
    if isinstance(loss, float):  # a Python float: a constant loss, as jax.grad takes it
        loss = jnp.asarray(loss, jnp.float32)
    if not (hasattr(loss, "shape") and hasattr(loss, "dtype") and loss.shape == ()
            and jnp.issubdtype(loss.dtype, jnp.floating)):
        raise TypeError(f"make_train_step: the loss that {name} returns must be a float scalar (the value "
                        f"differentiated); it is {_describe(loss)} (reduce it, e.g. with jnp.mean)")
    return loss, aux


def _describe(x) -> str:
    """What a loss function returned, in a few words (its type, an array's shape and dtype)."""
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_describe(v) for v in x[:4]) + (", ..." if len(x) > 4 else "")
        return f"a {type(x).__name__} of {len(x)} ({inner})"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"an array of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"a {type(x).__name__}"
