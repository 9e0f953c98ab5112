"""When a training run has diverged: the first step at which it did, and the cause.

A run has diverged at the first step where one of these holds (per step, in this order):

``nan loss``, ``inf loss``  the loss of a step that was applied. Dynamic loss scaling skips a step
                            whose gradients overflow (its loss may be non-finite): not applied, it
                            is not by itself a divergence, but see the next two.
``loss explosion``          the loss above ``explode_factor`` times the first finite step's.
``loss regression``         the mean loss of the last ``window`` applied steps (``window`` = 5 or
                            a 20th of the run, whichever is more) has given back more than
                            :data:`MAX_GIVEBACK` of the progress the run had made, from the first
                            step's loss down to its best windowed mean, once that progress was at
                            least :data:`MIN_PROGRESS` of the first loss (a pruned run: judged
                            from the step after its last mask update, ``pruning_until``, as
                            pruning raises the loss by design). A run whose loss climbs
                            back up (mxfp4 on the character transformer: to 8.1 nats/char, above
                            where it started) is not one whose accuracy can be compared; noise
                            around a plateau gives back a small part of the progress, not most.
``loss scale collapsed``    a step skipped at the dynamic loss scale's floor
                            (:data:`asicsim._src.emulate.loss_scaling.MIN_SCALE`, 2**-24): its gradients
                            overflow even scaled down 2**24 times, so every later step is skipped too.
``most steps skipped``      more than half of the run's steps skipped, said at the step where the
                            count passes half (the outcome is certain from there). Why half: a
                            healthy run skips a handful, about log2(init / the scale its gradients
                            allow) at the start and then about one per ``growth_interval`` (where
                            the scale grows into an overflow and halves back); a run that skipped
                            more than half its steps applied fewer than half its updates, so its
                            metric is not that of the steps it reports.

and after each chunk of steps and its evaluation:

``non-finite weights``      a weight the model uses is NaN or inf.
``non-finite test loss``    the recipe's forward pass gives a NaN or inf test loss (the weights are
                            finite, e.g. large enough that the activations overflow the format).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from asicsim._src.emulate.loss_scaling import MIN_SCALE

#: a run that skips more than this fraction of its steps has diverged
MAX_SKIPPED_FRACTION = 0.5
#: ``loss regression``: the windowed loss gave back more than this fraction of the progress made
MAX_GIVEBACK = 0.75
#: ``loss regression`` is judged once the best windowed loss is this fraction below the first loss
MIN_PROGRESS = 0.1


@dataclass
class DivergenceWatch:
    """Follows one run's steps; ``found`` is None or ``{"step", "cause"}`` (the first divergence)."""

    steps: int  # the run's steps (the denominator of "most steps skipped")
    explode_factor: float
    ref: float | None = None  # the first finite loss
    skipped: int = 0
    overflow: int = 0
    found: dict | None = None
    recent: list = field(default_factory=list)  # losses of the last ``window`` applied steps
    best: float | None = None  # the lowest windowed mean so far
    pruning_until: int = 0  # the last step that updates a pruning mask (asicsim._src.workloads.pruning)

    @property
    def window(self) -> int:
        return max(5, self.steps // 20)

    def chunk(self, first_step: int, metrics: dict) -> None:
        """Steps ``first_step + 1 ..`` of one chunk: ``metrics`` of make_train_step, stacked."""
        losses = np.asarray(metrics["loss"], np.float64)
        skipped = np.asarray(metrics.get("skipped", np.zeros(len(losses), bool)), bool)
        scales = np.asarray(metrics.get("loss_scale", np.ones(len(losses))), np.float64)
        if self.ref is None and np.isfinite(losses[0]):
            self.ref = float(losses[0])
        limit = int(self.steps * MAX_SKIPPED_FRACTION)  # more than this many skipped: diverged
        so_far = self.skipped + np.cumsum(skipped)  # skipped steps up to each step
        for i, loss in enumerate(losses):
            if self.found is not None:
                break
            step = first_step + i + 1
            if skipped[i] and scales[i] <= MIN_SCALE:
                self._diverged(step, f"loss scale collapsed: step skipped at the floor scale 2**{int(np.log2(MIN_SCALE))} "
                                     "(the gradients overflow even scaled down that far)")
            elif so_far[i] > limit:
                self._diverged(step, f"most steps skipped: {so_far[i]} of the first {step} steps skipped by "
                                     f"dynamic loss scaling, more than half of the run's {self.steps}")
            elif not skipped[i] and not np.isfinite(loss):
                self._diverged(step, "nan loss" if np.isnan(loss) else "inf loss")
            elif self.ref is not None and loss > self.explode_factor * self.ref:
                self._diverged(step, f"loss explosion: {loss:.4g} > {self.explode_factor:g} x the first "
                                     f"step's {self.ref:.4g}")
            elif not skipped[i]:
                self._regression(step, float(loss))
        self.skipped += int(skipped.sum())
        self.overflow += int(np.asarray(metrics.get("overflow", skipped), bool).sum())

    def _regression(self, step: int, loss: float) -> None:
        """The ``loss regression`` rule (module docstring) after an applied step's ``loss``."""
        self.recent = [*self.recent, loss][-self.window:]
        if step <= self.pruning_until:  # the best so far is the dense model's: judged afterwards
            self.best = None
            return
        if len(self.recent) < self.window or self.ref is None or self.ref <= 0:
            return
        mean = float(np.mean(self.recent))
        self.best = mean if self.best is None else min(self.best, mean)
        progress = self.ref - self.best
        if progress >= MIN_PROGRESS * self.ref and mean - self.best > MAX_GIVEBACK * progress:
            self._diverged(step, f"loss regression: the mean loss of the last {self.window} steps, {mean:.4g}, "
                                 f"gave back {(mean - self.best) / progress:.0%} of the progress from the first "
                                 f"step's {self.ref:.4g} to the best {self.best:.4g}")

    def weights(self, step: int, params) -> None:
        if not all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(params)):
            self._diverged(step, "non-finite weights")

    def evaluation(self, step: int, test_loss: float) -> None:
        if not np.isfinite(test_loss):
            self._diverged(step, f"non-finite test loss ({test_loss}) of the recipe's forward pass")

    def _diverged(self, step: int, cause: str) -> None:
        if self.found is None:
            self.found = {"step": int(step), "cause": cause}
