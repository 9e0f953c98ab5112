"""The inference models the batching simulator serves (:data:`INFERENCE_MODELS`): functions of
the batch size returning asicsim operations; what each is and where its shapes come from is in
:mod:`asicsim._src.system.batching`'s module docstring."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from asicsim._src.hw.operations import Elementwise, Gemm, Rnn
from asicsim._src.system.batching_errors import BatchingError, positive_int

DEEPBENCH_INFERENCE_GEMMS = (
    (7680, 2560, "8-10"),   # DeepSpeech (GRU 2560: 3 gates x 2560)
    (3072, 1024, "11-13"),  # DeepSpeech (GRU 1024)
    (6144, 2048, "36,39,42"),  # DeepSpeech / gru
    (4608, 1536, "37,40,43"),  # DeepSpeech / gru
    (8448, 2816, "38,41,44"),  # DeepSpeech / gru
    (512, 512, "53,63,73"),    # DeepSpeech
    (1024, 512, "54,64,74"),   # DeepSpeech
)



# --- models ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InferenceModel:
    """A named inference model: ``ops(batch)`` lists the asicsim operations one batch runs."""

    name: str
    build: Callable[..., list] = field(repr=False)
    params: tuple[tuple[str, object], ...] = ()
    description: str = ""

    def ops(self, batch: int) -> list:
        return self.build(positive_int("batch", batch), **dict(self.params))

    def recurrent_weight_elems(self) -> int:
        """Weight elements of the largest recurrent matrix (one layer's), 0 without RNN layers."""
        from asicsim._src.hw.operations import RNN_CELLS

        return max((RNN_CELLS[op.cell] * op.hidden * op.hidden for op in self.ops(1) if isinstance(op, Rnn)),
                   default=0)


def _mlp(batch: int, width: int = 2560, layers: int = 3) -> list:
    out = []
    for i in range(layers):
        out += [Gemm(batch, width, width, name=f"fc{i + 1} {width}x{width}"),
                Elementwise(batch * width, 1, on_chip=True, name=f"relu{i + 1}")]
    return out


def _gru_speech(batch: int, hidden: int = 1024, layers: int = 3, steps: int = 100, outputs: int = 35) -> list:
    ops: list = [Rnn("gru", hidden, batch, steps, name=f"gru{i + 1} h{hidden} t{steps}") for i in range(layers)]
    return [*ops, Gemm(batch * steps, outputs, hidden, name=f"output {hidden}->{outputs}")]


def _deepbench_gemms(batch: int) -> list:
    return [Gemm(batch, m, k, name=f"deepbench inference_server rows {rows}: {m}x{k}")
            for m, k, rows in DEEPBENCH_INFERENCE_GEMMS]


INFERENCE_MODELS: dict[str, InferenceModel] = {
    "mlp": InferenceModel("mlp", _mlp, (("width", 2560), ("layers", 3)),
                          "3 fully connected 2560x2560 layers + ReLU (DeepSpeech-2 widths, DeepBench)"),
    "gru_speech": InferenceModel(
        "gru_speech", _gru_speech, (("hidden", 1024), ("layers", 3), ("steps", 100), ("outputs", 35)),
        "3 GRU layers, hidden 1024, 100 steps, output layer to 35 characters (DeepSpeech-2 / DeepBench)"),
    "deepbench_gemm_inference": InferenceModel(
        "deepbench_gemm_inference", _deepbench_gemms, (),
        "DeepBench inference_server DeepSpeech GEMMs with N = batch, one after another"),
}


def get_model(model: str | InferenceModel, **params) -> InferenceModel:
    """A preset by name (``params`` override its defaults, e.g. ``hidden=1536``) or a model itself."""
    if isinstance(model, InferenceModel):
        m = model
    elif model in INFERENCE_MODELS:
        m = INFERENCE_MODELS[model]
    else:
        raise BatchingError(f"model = {model!r}; allowed: {' | '.join(INFERENCE_MODELS)} or an InferenceModel")
    if params:
        bad = sorted(set(params) - {k for k, _ in m.params})
        if bad:
            raise BatchingError(f"model {m.name}: parameter(s) {bad}; allowed: {[k for k, _ in m.params]}")
        m = replace(m, params=tuple((k, params.get(k, v)) for k, v in m.params))
    return m
