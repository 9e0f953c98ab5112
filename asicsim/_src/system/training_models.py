"""The models a data-parallel training step is priced for (:mod:`asicsim._src.system.scaling`): a
:class:`TrainingModel` (a stack of dense or recurrent layers, checked when built), its parameters
and per-layer forward and backward operations, and the named ones (:data:`MODELS`)."""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.hw.links import TopologyError
from asicsim._src.hw.operations import RNN_CELLS, Gemm, Rnn
from asicsim._src.numerics.frozen_fields import convert_fields, converted, list_as_tuple


@dataclass(frozen=True)
class TrainingModel:
    """A stack of dense (``kind="mlp"``) or recurrent (``kind="rnn"``) layers.

    ``widths = (input, out_1, ..., out_L)``: layer ``i`` maps ``widths[i]`` to ``widths[i + 1]``
    (for an RNN, the hidden size). ``steps``: time steps per sample (RNN; 1 for an MLP).
    """

    name: str
    kind: str
    widths: tuple[int, ...] = converted(list_as_tuple)  # a list (from TOML) is kept as a tuple
    cell: str = "vanilla"
    steps: int = 1
    description: str = ""

    def __post_init__(self) -> None:
        convert_fields(self)
        where = f"model {self.name!r}"
        if self.kind not in ("mlp", "rnn"):
            raise TopologyError(f"{where}: kind = {self.kind!r}; allowed: mlp | rnn")
        if len(self.widths) < 2 or not all(isinstance(w, int) and w >= 1 for w in self.widths):
            raise TopologyError(f"{where}: widths = {self.widths!r}; allowed: two or more integers >= 1")
        if self.cell not in RNN_CELLS:
            raise TopologyError(f"{where}: cell = {self.cell!r}; allowed: {' | '.join(RNN_CELLS)}")
        if not (isinstance(self.steps, int) and self.steps >= 1):
            raise TopologyError(f"{where}: steps = {self.steps!r}; allowed: an integer >= 1")

    def layer_parameters(self) -> list[int]:
        """Weights per layer (biases not counted)."""
        g = RNN_CELLS[self.cell] if self.kind == "rnn" else 1
        return [g * o * (i + (o if self.kind == "rnn" else 0))
                for i, o in zip(self.widths[:-1], self.widths[1:], strict=True)]

    @property
    def parameters(self) -> int:
        return sum(self.layer_parameters())

    def layer_operations(self, batch: int) -> list[tuple[list, list]]:
        """Per layer: (forward operations, backward operations) for ``batch`` samples."""
        if not (isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1):
            raise TopologyError(f"model {self.name!r}: batch = {batch!r}; allowed: an integer >= 1")
        out = []
        for li, (k, n) in enumerate(zip(self.widths[:-1], self.widths[1:], strict=True)):
            tag = f"{self.name} L{li}"
            if self.kind == "mlp":
                fwd = [Gemm(batch, n, k, name=f"{tag} fwd")]
                bwd = [Gemm(k, n, batch, name=f"{tag} dW")]
                if li > 0:
                    bwd.insert(0, Gemm(batch, k, n, name=f"{tag} dX"))
            else:
                g, rows = RNN_CELLS[self.cell], batch * self.steps
                fwd = [Rnn(self.cell, n, batch, self.steps, input_size=k, name=f"{tag} fwd")]
                bwd = [Rnn(self.cell, n, batch, self.steps, input_size=k, name=f"{tag} bptt"),
                       Gemm(k, g * n, rows, name=f"{tag} dW_in"), Gemm(n, g * n, rows, name=f"{tag} dW_rec")]
            out.append((fwd, bwd))
        return out


MODELS: dict[str, TrainingModel] = {m.name: m for m in (
    TrainingModel("mlp_2560", "mlp", (2560,) * 5,
                  description="4 fully connected 2560x2560 layers (DeepBench's DeepSpeech GEMM training "
                              "width 2560); 26.2 M weights"),
    TrainingModel("rnn_2560", "rnn", (2560,) * 4, "vanilla", 50,
                  description="3 vanilla RNN layers, hidden 2560, 50 time steps per sample (DeepBench "
                              "vanilla training kernels h2560 t50, DeepSpeech); 39.3 M weights"),
    TrainingModel("gru_2816", "rnn", (2816,) * 4, "gru", 187,
                  description="3 GRU layers, hidden 2816, 187 time steps per sample (DeepBench GRU "
                              "training kernel h2816 t187, DeepSpeech); 142.7 M weights"),
)}


def get_model(spec: str | TrainingModel) -> TrainingModel:
    if isinstance(spec, TrainingModel):
        return spec
    if spec not in MODELS:
        raise TopologyError(f"model = {spec!r}; allowed: {' | '.join(MODELS)}")
    return MODELS[spec]
