"""Exported weights (:mod:`.export`) in one numpy ``.npz`` file: :func:`save_codes`,
:func:`load_codes` (numpy alone reads it: arrays keyed ``path:field``, metadata as JSON), and
ONNX QDQ (``DequantizeLinear`` initializers) for int8 per-tensor and per-channel weights where
the optional ``onnx`` package is installed (:func:`onnx_qdq`)."""

from __future__ import annotations

import json

import jax
import numpy as np

from asicsim._src.emulate.export import WeightCodes
from asicsim._src.emulate.layer_rules import key_name

_FIELDS = ("codes", "scales", "zeros", "tensor_amax")


def save_codes(path, tree) -> None:
    """``tree``'s exported weights (and its other array leaves) in one ``.npz``, keyed by leaf
    path, with each :class:`WeightCodes`' metadata as JSON (numpy only to read it back)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, WeightCodes))
    arrays, meta = {}, {}
    for keys, leaf in flat:
        path_ = "/".join(key_name(k) for k in keys)
        if isinstance(leaf, WeightCodes):
            arrays.update({f"{path_}:{f}": np.asarray(getattr(leaf, f)) for f in _FIELDS if getattr(leaf, f) is not None})
            meta[path_] = {"element": leaf.element, "scale_kind": leaf.scale_kind, "tile": list(leaf.tile),
                           "axes": list(leaf.axes), "scale_format": leaf.scale_format, "dtype": leaf.dtype}
        else:
            arrays[path_] = np.asarray(leaf)
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


def load_codes(path) -> dict:
    """{leaf path: :class:`WeightCodes` or array} from :func:`save_codes`."""
    with np.load(path) as z:
        meta = json.loads(str(z["__meta__"]))
        out = {k: z[k] for k in z.files if k != "__meta__" and ":" not in k}
        for p, m in meta.items():
            got = {f: z[f"{p}:{f}"] if f"{p}:{f}" in z.files else None for f in _FIELDS}
            out[p] = WeightCodes(**got, element=m["element"], scale_kind=m["scale_kind"], tile=tuple(m["tile"]),
                                 axes=tuple(m["axes"]), scale_format=m["scale_format"], dtype=m["dtype"])
    return out


def _qdq_parts(path: str, wc) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes as a (K, N) MatMul operand, float32 scales: one, or one per output channel)."""
    per_tensor = wc.scales is not None and wc.scales.shape == (1, 1)
    per_channel = wc.scales is not None and wc.scales.ndim == 2 and wc.scales.shape[1] == 1 and wc.tile[0] == 1
    if not (isinstance(wc, WeightCodes) and wc.element == "int8" and wc.scale_kind == "fp32"
            and wc.codes.ndim == 2 and (per_tensor or per_channel)):
        what = f"{getattr(wc, 'element', type(wc).__name__)} {getattr(wc, 'scale_kind', '')} of shape " \
               f"{getattr(getattr(wc, 'codes', None), 'shape', '?')}"
        raise ValueError(f"onnx_qdq: {path}: {what}; ONNX QDQ is written for 2-d int8 weights with fp32 scales "
                         "per tensor or per output channel (int8_ptq_tensor, int8_ptq_channel)")
    codes = wc.codes if wc.axes == (0,) else wc.codes.T  # (K, N): x @ w
    return np.ascontiguousarray(codes), (wc.scales.reshape(()) if per_tensor else wc.scales[:, 0]).astype(np.float32)


def onnx_qdq(tree, *, opset: int = 13):
    """An ONNX model (``onnx.ModelProto``) of ``tree``'s int8 weights in QDQ form: per weight an
    int8 initializer ``<path>.q`` with its scale and a zero zero point into a ``DequantizeLinear``
    (``axis=1``: per output channel; ONNX computes ``(q - 0) * scale`` in float32, the product the
    export dequantizes with) giving output ``<path>.w``, and a graph input ``<path>.x`` (M, K)
    with output ``<path>.y = x @ w`` through ``MatMul``. Needs the optional ``onnx`` package (``pip install asicsim[onnx]``)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        raise ImportError("onnx_qdq needs the optional onnx package: pip install 'asicsim[onnx]'") from e
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, WeightCodes))
    nodes, inits, inputs, outputs = [], [], [], []
    for keys, leaf in flat:
        if not isinstance(leaf, WeightCodes):
            continue
        path = "/".join(key_name(k) for k in keys)
        codes, scale = _qdq_parts(path, leaf)
        inits += [numpy_helper.from_array(codes.astype(np.int8), f"{path}.q"),
                  numpy_helper.from_array(scale, f"{path}.scale"),
                  numpy_helper.from_array(np.zeros(scale.shape, np.int8), f"{path}.zero")]
        nodes += [helper.make_node("DequantizeLinear", [f"{path}.q", f"{path}.scale", f"{path}.zero"], [f"{path}.w"],
                                   axis=1),
                  helper.make_node("MatMul", [f"{path}.x", f"{path}.w"], [f"{path}.y"])]
        inputs.append(helper.make_tensor_value_info(f"{path}.x", TensorProto.FLOAT, ["M", codes.shape[0]]))
        outputs += [helper.make_tensor_value_info(f"{path}.y", TensorProto.FLOAT, ["M", codes.shape[1]]),
                    helper.make_tensor_value_info(f"{path}.w", TensorProto.FLOAT, list(codes.shape))]
    if not nodes:
        raise ValueError("onnx_qdq: the tree holds no exported weight (export_codes under an int8 recipe first)")
    model = helper.make_model(helper.make_graph(nodes, "asicsim_qdq", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", opset)], producer_name="asicsim")
    model.ir_version = 8  # opset 13 is IR 7+; newer IR versions are refused by older runtimes
    onnx.checker.check_model(model)
    return model
