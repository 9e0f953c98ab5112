"""Training states that wrap another (:class:`asicsim._src.workloads.pruning.PrunedState` with its
masks, :class:`asicsim._src.workloads.speech_layers.NormState` with running statistics) read as the
state they wrap: training loops, evaluators and checkpoints take ``params``, ``loss_scale`` and
``lsq`` from any of them, however deeply wrapped."""

from __future__ import annotations

#: what a wrapper reads through from the state it wraps (``TrainState``'s fields)
READ_THROUGH = ("params", "loss_scale", "lsq")


def reads_through(cls):
    """Class decorator: ``cls`` (a NamedTuple with a ``train`` field) gets each of
    :data:`READ_THROUGH` as a property that reads it from ``train``."""
    for name in READ_THROUGH:
        setattr(cls, name, property(lambda s, name=name: getattr(s.train, name),
                                    doc=f"The wrapped training state's ``{name}``."))
    return cls
