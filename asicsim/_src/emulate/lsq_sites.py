"""Learned step sizes at GEMM sites: a recipe role with ``scaling = "lsq"`` (one step per tensor)
or ``"lsq_channel"`` (role ``weight``: one step per output channel) rounds that GEMM operand with
:func:`asicsim._src.emulate.lsq.lsq_quantize` (Esser et al., "Learned Step Size Quantization", ICLR
2020) before the emulated GEMM, which then takes it as already on its grid.

The steps are an argument of the emulated function, ``asicsim_lsq``: a sequence of float32 arrays,
one per LSQ operand in the order the interpreter meets the GEMMs (forward operands, lhs before
rhs), each a scalar or, per channel, the weight's shape with its contraction axes set to 1. Its
gradient is LSQ's (Eq. 3 times the gradient scale ``g`` of Section 2.2); the operand's gradient is
the straight-through estimator (Eq. 5). Without ``asicsim_lsq`` each step is the paper's initial
step :func:`~asicsim._src.emulate.lsq.lsq_init` of the operand in this call (not differentiated; an
:class:`InitialStepsWarning` says so), and
:func:`asicsim._src.emulate.transform.init_lsq_steps` returns those steps: what :func:`asicsim.make_train_step` keeps in
``TrainState.lsq`` and trains with the optimizer.

Which axes are examples (left out of ``g``'s count, ``batch_axes`` of ``lsq_quantize``): for an
activation operand every axis the GEMM does not contract (``N_F``: the contracted features of one
example; a convolution's input: every axis but its batch axis), for a weight none (``N_W``: the
weight's elements, or one channel's).

Inside control flow the steps follow the rows of delayed scaling (:mod:`.site_rows`), by one
mechanism, :class:`Body`: a step per body operand, taken in order as each body is traced.

- a scan over stacked layers (:mod:`.layer_scan`): a step per *layer*: the body operand's step
  has a leading axis of the scan's length (``(n, *shape)``, in the order of the scanned
  weights), indexed by the iteration as delayed scaling's amax rows are; nested layer scans
  stack their lengths, outer first. Initial steps: each layer's on its own operands.
- a time scan, ``while_loop`` or ``jax.checkpoint``: one step for every iteration (as one amax row),
  closed over by the body; its gradient is the sum over iterations. Initial steps: a time scan's
  the mean over its iterations of each iteration's ``lsq_init`` (for equal-sized iterations the
  paper's ``2 mean|v| / sqrt(Qp)`` over the operand at every time step, as a layer's activations
  over a sequence are; exactly the first iteration's where all are equal, as a weight's are: an
  RNN's recurrent operand is zero at its first step from a zero state, where a first-iteration
  step would be 0); a while loop's and a checkpoint's on the operands of the first iteration
  (a while loop's body run once on the initial carry, even where the loop would not run).
  In an initialising call an all-zero operand (or channel) has initial step 0 and is rounded to
  0 exactly; :func:`asicsim.make_train_step` raises such a step to :data:`LSQ_MIN_STEP`.
- a ``cond``/``switch``: each branch its own steps, branch 0's first (``lax.cond``'s false
  branch); initial steps: each branch run on the operands (the one not taken too).
- a user's ``custom_vjp``/``custom_jvp``: refused; its rule gives the gradients of everything
  inside it, so a learned step there would get the user's gradient (none), not LSQ's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from asicsim._src.emulate.fields import LSQ_SCALINGS
from asicsim._src.emulate.layer_rules import collecting
from asicsim._src.emulate.lsq import lsq_init, lsq_quantize
from asicsim._src.emulate.trace import recording
from asicsim._src.numerics import get_format
from asicsim._src.numerics.exact_div import divide

#: The smallest step training keeps: after each optimizer update a step below it is set to it (a
#: projection onto ``step >= LSQ_MIN_STEP``), so that a step driven to 0 or below does not turn
#: the next forward into NaN. 1e-5 as quant_mp's LSQ (``scale = where(scale > eps, scale, eps)``,
#: ``eps = 1e-5``; found with the search tool, the paper has no rule). Absolute, not relative to
#: the tensor: :func:`asicsim.make_train_step` raises an initial step below it (``lsq_init`` of a
#: tiny or all-zero operand) to it as well.
LSQ_MIN_STEP = 1e-5


def clamp_steps(steps):
    """``steps`` (a pytree of float32 arrays) with each value below :data:`LSQ_MIN_STEP` set to it
    (NaN stays NaN: a NaN update is the loss scaler's to skip)."""
    return jax.tree_util.tree_map(lambda s: jnp.where(s < LSQ_MIN_STEP, jnp.float32(LSQ_MIN_STEP), s), steps)


class InitialStepsWarning(UserWarning):
    """An emulated call with learned-step roles but no ``asicsim_lsq``: its steps are the paper's
    initial steps of this call's own operands, not trained ones."""


def step_shape(x_shape: tuple[int, ...], spec, kept: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the step of operand ``x_shape`` (its non-contracted axes ``kept``): a scalar,
    or per channel ``x``'s shape with every other axis 1."""
    if spec.scaling != "lsq_channel" or not kept:
        return ()
    return tuple(n if i in kept else 1 for i, n in enumerate(x_shape))


def lsq_operand(x, spec, role: str, kept: tuple[int, ...], step=None):
    """``(x rounded by LSQ with ``step``, the initial step used or None)``; ``step`` None: the
    paper's initial step of ``x`` (:func:`lsq_init`, not differentiated)."""
    init = None
    if step is None:
        chan = spec.scaling == "lsq_channel" and kept
        init = lax.stop_gradient(lsq_init(x, spec.format, axis=tuple(kept) if chan else None))
        # a zero init is an all-zero operand (channel): any positive step rounds it to 0 exactly
        # (an RNN's zero initial state; the step itself is its first iteration's and training's concern)
        step = jnp.where(init > 0, init, jnp.float32(1))
    batch = () if role == "weight" else tuple(kept)
    return lsq_quantize(x, step, spec.format, batch_axes=batch).astype(x.dtype), init


#: What an observing call (:func:`asicsim._src.emulate.transform.observe_lsq`) records per LSQ
#: operand, as sums over its elements: ``r = x / step`` (as :func:`lsq_quantize` divides) and ``q``
#: the rounded operand; ``saturated``: finite elements beyond the codes (``r > Qp`` or ``r < -Qn``,
#: moved by the clip), ``underflow``: nonzero finite ones rounded to 0, ``err_sq``/``sq``: the sums
#: of ``(q - x)**2`` and ``x**2`` over the finite elements. Ratios of these sums are fractions;
#: over a time scan's iterations (equal sizes) the mean of each sum is kept (the same ratios).
OBSERVED = ("size", "nonzero", "zero", "underflow", "saturated", "nonfinite", "err_sq", "sq")


def observe(x, q, step, spec) -> jax.Array:
    """:data:`OBSERVED` of operand ``x`` rounded to ``q`` with ``step`` (float32, shape (8,))."""
    fmt = get_format(spec.format)
    x = jnp.asarray(x, jnp.float32)
    q = jnp.asarray(q, jnp.float32)
    r = divide(x, jnp.broadcast_to(jnp.asarray(step, jnp.float32), x.shape))
    finite = jnp.isfinite(x)
    nonzero = finite & (x != 0)
    sat = finite & ((r > fmt.kmax) | (r < fmt.kmin))
    err = jnp.where(finite, q - x, 0.0)
    xs = jnp.where(finite, x, 0.0)
    counts = [jnp.float32(x.size), jnp.sum(nonzero), jnp.sum(finite & (x == 0)), jnp.sum(nonzero & (q == 0)),
              jnp.sum(sat), jnp.sum(~jnp.isfinite(q))]
    return jnp.stack([*(c.astype(jnp.float32) for c in counts), jnp.sum(err * err), jnp.sum(xs * xs)])


class LsqSteps:
    """The steps of one emulated call: ``given`` (consumed in order) or, where None, initialised
    from each operand; ``seen`` collects the initial steps used, or with ``observe`` (and given
    steps) each operand's :func:`observe` vector, and ``labels`` each site's ``(role, weight path)``."""

    def __init__(self, given=None, observe: bool = False):
        self.given = None if given is None else list(given)
        self.observing = observe and given is not None
        self.next = 0
        self.seen: list = []
        self.labels: dict = {}  # site number -> (role, the GEMM's weight path), when observing
        self.layers: list = []  # (iteration, length) of each enclosing layer scan, outer first

    @property
    def initialising(self) -> bool:
        """No steps given: each is ``lsq_init`` of its operand, collected in ``seen``."""
        return self.given is None

    def operands(self, pol, roles, xs, kept, custom: int, where: str, path: str = ""):
        """``xs`` with each LSQ operand rounded (``kept``: per operand, the axes not contracted),
        and per operand whether it was (then on its grid: the GEMM does not round it again)."""
        out, done = [], []
        for x, role, keep in zip(xs, roles, kept, strict=True):
            spec = pol.role(role)
            if spec is None or spec.scaling not in LSQ_SCALINGS:
                out.append(x)
                done.append(False)
                continue
            if custom:
                raise ValueError(f"recipe {pol.name!r}: role {role!r} has scaling = {str(spec.scaling)!r} at a "
                                 f"{where} inside a custom_vjp or custom_jvp function: its rule gives the gradients "
                                 "inside it, so a learned step there gets no LSQ gradient; move the GEMM out of "
                                 "the custom rule, or call lsq_quantize in it with a step of your own")
            if self.observing:
                self.labels[self.next] = (role, path)
            step = self._step(x, spec, keep, role, where)
            q, init = lsq_operand(x, spec, role, keep, step)
            if init is not None:
                self.seen.append(init)
            elif self.observing:
                self.seen.append(observe(x, q, step, spec))
            out.append(q)
            done.append(True)
        return out, tuple(done)

    def _step(self, x, spec, kept, role: str, where: str):
        if self.given is None:
            return None
        i = self.next
        self.next += 1
        if i >= len(self.given):
            raise ValueError(f"asicsim_lsq has {len(self.given)} step(s) but the function has more LSQ operands "
                             f"(the {role} of a {where} is number {i}); init_lsq_steps gives the steps it needs")
        step = jnp.asarray(self.given[i])
        want = tuple(n for _, n in self.layers) + step_shape(tuple(x.shape), spec, kept)
        if tuple(step.shape) != want:
            stack = f", a step per layer of {len(self.layers)} layer scan(s)" if self.layers else ""
            raise ValueError(f"asicsim_lsq[{i}] (the {role} of a {where}) has shape {tuple(step.shape)}; "
                             f"expected {want} (scaling = {str(spec.scaling)!r}, operand shape {tuple(x.shape)}"
                             f"{stack})")
        for t, _ in self.layers:  # this layer's step
            step = step[t]
        return step

    def check_used(self, fn_name: str) -> None:
        """Every given step was used (a list for another function is an error, not ignored)."""
        if self.given is not None and self.next != len(self.given):
            raise ValueError(f"asicsim_lsq has {len(self.given)} step(s) but {fn_name} has {self.next} LSQ "
                             "operand(s) (one step per operand a role with scaling = 'lsq' or 'lsq_channel' rounds)")


class Body:
    """The steps of one nested body (a scan's, a loop's, a branch's, a checkpoint's): every trace
    of it starts at the same given step (jax may trace a body more than once), and the initial
    steps a trace makes are taken out of ``seen`` (tracers of the body's own trace) for the
    caller to return as the body's extra outputs."""

    def __init__(self, lsq: LsqSteps):
        self.lsq = lsq
        self.start, self.seen0 = lsq.next, len(lsq.seen)
        self.end = lsq.next

    def enter(self) -> None:
        self.lsq.next = self.start

    def leave(self) -> list:
        """The initial steps this trace made (removed from ``seen``)."""
        self.end = self.lsq.next
        made = self.lsq.seen[self.seen0:]
        del self.lsq.seen[self.seen0:]
        return made

    def close(self, made=()) -> None:
        """After the body: the next given step is the one after its own; ``made`` (the initial
        steps, as the caller got them out) join ``seen``."""
        self.lsq.next = self.end
        self.lsq.seen.extend(made)


def close_bodies(lsq: LsqSteps, bodies, made) -> None:
    """After bodies traced one after another (a loop's cond and body, a cond's branches): the next
    given step follows the last of theirs, and ``made`` joins ``seen``."""
    lsq.next = max((b.end for b in bodies), default=lsq.next)
    lsq.seen.extend(made)


def dry_run(fn, *args):
    """``fn(*args)`` for its initial steps only: the GEMMs it traces are neither recorded for
    the cost model nor logged as rule choices (the real run records them)."""
    with recording(), collecting():
        return fn(*args)


def conv_kept(dn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The non-contracted axes of a convolution's input (its batch axis) and kernel (its output
    feature axis), from its ``ConvDimensionNumbers``."""
    return (dn.lhs_spec[0],), (dn.rhs_spec[0],)


def dot_kept(dn, ndims) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per operand of a ``dot_general``, the axes it does not contract (batch axes included)."""
    return tuple(tuple(i for i in range(n) if i not in dn[0][side]) for side, n in enumerate(ndims))
