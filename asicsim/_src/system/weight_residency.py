"""Persistent RNNs: whether a model's recurrent weights stay resident in a design's weight buffer,
and the service of the same design with and without that residency (Diamos et al. 2016)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from asicsim._src.hw.design_files import load_design
from asicsim._src.system.batching import service_table
from asicsim._src.system.batching_errors import BatchingError, nonneg_float
from asicsim._src.system.inference_models import InferenceModel, get_model

# --- persistent RNN: weight residency -------------------------------------------------------------

def weight_residency(model: str | InferenceModel, design) -> dict | None:
    """Whether one recurrent layer's weights fit the resident part of the weight buffer(s).

    ``None`` for a model without recurrent layers or a design without on-chip buffers (GPU). The
    resident capacity is what the cost model uses: a double-buffered buffer keeps half; a buffer
    shared with other operands shares it (so "fits" here is an upper bound).
    """
    m = get_model(model)
    elems = m.recurrent_weight_elems()
    d = load_design(design)
    wb = d.weight_buffer()
    if not elems or wb is None:
        return None
    need = elems * wb.weight_bits / 8
    have = wb.resident_kib * 1024
    return {"design": d.name, "recurrent_weights_mib": need / 2**20, "resident_capacity_mib": have / 2**20,
            "fits": bool(need <= have)}


def with_weight_buffer(design, capacity_kib: float):
    """The design with every weight-holding buffer resized to ``capacity_kib`` (name suffixed)."""
    d = load_design(design)
    kib = nonneg_float("capacity_kib", capacity_kib, positive=True)
    if d.weight_buffer() is None:
        raise BatchingError(f"design = {d.name!r}; allowed: a systolic design with a weight buffer")
    return d.with_weight_buffer(kib)


def residency_variant(model: str | InferenceModel, design):
    """The same design with the other answer to "do the recurrent weights stay on chip?".

    When one layer's recurrent weights fit, the weight buffer shrinks to a quarter of them; when
    they do not, it grows to twice what they need (room for the step's other tiles), rounded up
    to a power of two KiB. ``None`` when the model has no recurrent layer or the design no buffer.
    """
    res = weight_residency(model, design)
    if res is None:
        return None
    d = load_design(design)
    need_kib = res["recurrent_weights_mib"] * 1024
    kib = need_kib / 4 if res["fits"] else 2 ** math.ceil(math.log2(2 * need_kib))
    return with_weight_buffer(d, kib)


def residency_comparison(model: str | InferenceModel, design, formats=None,
                         batches: Sequence[int] = (1, 4, 16, 64, 256)) -> list[dict]:
    """Per-batch service time and energy per request on the design and on :func:`residency_variant`."""
    other = residency_variant(model, design)
    if other is None:
        return []
    rows = []
    for d in (load_design(design), other):
        t = service_table(model, d, formats, max(batches))
        fits = weight_residency(model, d)["fits"]
        weight_kib = round(d.weight_buffer().capacity_kib)
        for r in t.rows(list(batches)):
            rows.append({"design": d.name, "weight_buffer_kib": weight_kib, "weights_resident": fits, **r})
    return rows
