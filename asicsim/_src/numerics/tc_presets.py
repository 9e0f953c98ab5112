"""Tensor-core presets for NVIDIA GPUs, per input and output format, from published models.

Every parameter below is read from Khattak & Mikaitis's MATLAB models ("Accurate models of
NVIDIA tensor cores", 2025), github.com/north-numerical-computing/MATLAB-tensor-core at commit
b12b5a700957655375a1b0c1d0c26e76065da015 (BSD 2-Clause): ``models/<GPU>TC.m`` sets ``fma``
(products per block), ``neab`` (extra alignment bits), ``frmode`` (final rounding) and
``min_exp_limit`` (the alignment exponent's lower limit); ``models/tools/Generic_BFMA_TC.m`` is the
block they feed, ``models/tools/GEMM.m`` the recursion over blocks. Their mapping onto a
:class:`~asicsim._src.numerics.mac.MacSpec`:

* ``order = tensorcore:<fma>``, ``tc_exponent = "operands"`` (``denorm_prd = 1``: a product aligns
  at ``e_a + e_b`` with its significand in [0, 4)), ``tc_min_exp = min_exp_limit``;
* fp32 out: ``acc = fp32``, ``guard_bits = neab``; a negative ``neab`` (fp8 on Ada and Hopper)
  keeps ``23 + neab`` fraction bits, as ``GEMM.m`` narrows the output significand: ``acc =
  e8m<23+neab>``, ``guard_bits = 0``, ``out = fp32``;
* fp16 out: ``acc = fp16`` rounded to nearest (``frmode = 'rne'``) after each block, the
  alignment keeping ``23 + neab`` fraction bits: ``guard_bits = 13 + neab``;
* ``frmode = 'rz'`` is ``acc_rounding = rtz``.

Every preset is proven on the inner products the authors measured on each GPU
(``model_validation/<GPU>/<format>/``): tests/numerics/test_tensorcore_measured.py. ``A2`` runs
``A100TC.m`` and ``L40S`` (``L40STC.m``) the Ada parameters, as the published files do.
"""

from __future__ import annotations

from .catalog import get_format

SOURCE = ("github.com/north-numerical-computing/MATLAB-tensor-core "
          "@ b12b5a700957655375a1b0c1d0c26e76065da015")

# (fma, neab, min_exp_limit for fp32 out, min_exp_limit for fp16 out, model file)
_FP16_BF16 = {
    "v100": (4, 0, None, -19, "models/V100TC.m"),
    "a100": (8, 1, -132, -20, "models/A100TC.m"),
    "a2": (8, 1, -132, -20, "models/A2TC.m -> A100TC.m"),
    "ada": (8, 1, -132, -20, "models/AdaTC.m"),
    "l40s": (8, 1, -132, -20, "models/L40STC.m"),
    "h100": (16, 2, -133, -21, "models/H100TC.m"),
    "h200": (16, 2, -133, -21, "models/H200TC.m -> H100TC.m"),
    "b200": (16, 2, -133, -21, "models/B200TC.m"),
}
_TF32_FMA = {"a100": 4, "a2": 4, "ada": 4, "l40s": 4, "h100": 8, "h200": 8, "b200": 8}
_FP8 = {  # (fma, neab); fp8 on Hopper: "FMA size is 16, but interleaved pattern is used to join
    # two 16-element vectors" (H100TC.m): one alignment over 32 products
    "ada": (16, -10), "l40s": (16, -10), "h100": (32, -10), "h200": (32, -10), "b200": (32, 2),
}
#: B200 fp8 -> fp32 is not B200TC.m's model: with its round-toward-zero block (or B200TCRN.m's
#: round to nearest) the measured D differs on 95 (rne: 20) of the first 300 E4M3 rows. Every one of
#: the 2 x 5,000 measured rows is reproduced when c is added late: the 32 products aligned and
#: summed as above (2 extra bits), that sum truncated to fp32, then c added with one rounding to
#: nearest (our fit to the measured vectors, tests/numerics/test_tensorcore_measured.py).
B200_FP8 = "model_validation/B200/E4M3, E5M2 (measured); B200TCRN.m frmode='rne'; c added late (our fit)"
_IN = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "fp8_e4m3": "float8_e4m3fn",
       "fp8_e5m2": "float8_e5m2"}


def _fmt(name: str) -> str:
    return get_format(name).name


def _table() -> dict[tuple[str, str, str], tuple[str, str]]:
    """(gpu, input format, output format) -> (MacSpec text, source)."""
    out = {}
    for gpu, (fma, neab, min32, min16, path) in _FP16_BF16.items():
        lim = "none" if min32 is None else min32
        src = f"{SOURCE} {path}"
        base = f"order=tensorcore:{fma},tc_exponent=operands,acc_rounding=rtz"
        ins = ["fp16", "bf16"] if gpu != "v100" else ["fp16"]
        for fin in ins:
            out[gpu, _IN[fin], "float32"] = (f"a={fin},{base},acc=fp32,guard_bits={neab},tc_min_exp={lim}", src)
        out[gpu, "float16", "float16"] = (
            f"a=fp16,order=tensorcore:{fma},tc_exponent=operands,acc=fp16,acc_rounding=rne,"
            f"guard_bits={13 + neab},tc_min_exp={min16}", src)
        if gpu in _TF32_FMA:
            out[gpu, "tf32", "float32"] = (
                f"a=tf32,order=tensorcore:{_TF32_FMA[gpu]},tc_exponent=operands,acc_rounding=rtz,"
                f"acc=fp32,guard_bits={neab},tc_min_exp={lim}", src)
        if gpu in _FP8:
            k, eab = _FP8[gpu]
            acc = f"acc=e8m{23 + eab},guard_bits=0,out=fp32" if eab < 0 else f"acc=fp32,guard_bits={eab}"
            rounding, fp8_src = "acc_rounding=rtz", src
            if gpu == "b200":  # see B200_FP8 above
                rounding, fp8_src = "acc_rounding=rne,tc_late_c=rtz", f"{SOURCE} {B200_FP8}"
            for fin in ("fp8_e4m3", "fp8_e5m2"):
                out[gpu, _IN[fin], "float32"] = (
                    f"a={fin},order=tensorcore:{k},tc_exponent=operands,{rounding},{acc},"
                    f"tc_min_exp={lim}", fp8_src)
    return out


PRESETS = _table()


def supported() -> list[str]:
    """The supported combinations as ``gpu/a/out`` lines."""
    return [f"{g}/{a}/{o}" for g, a, o in PRESETS]


#: fp8 operands of the two fp8 formats in one GEMM (E4M3 x E5M2: the backward GEMMs of fp8
#: "hybrid" training, Micikevicius et al. 2022): Hopper's and Ada's MMA take the pair
#: (PTX ISA, ``mma``/``wgmma`` ``.e4m3``/``.e5m2`` operand types). The published models have the
#: same parameters for both formats (``models/<GPU>TC.m``: one fp8 branch); the mixed pair runs
#: them with each operand on its own format. Not measured: the published vectors are same-format.
MIXED_FP8 = ("float8_e4m3fn", "float8_e5m2")


def gpus() -> list[str]:
    """The GPUs with presets."""
    return sorted({g for g, _, _ in PRESETS})


def preset_text(gpu: str, a_fmt: str, out: str = "fp32", b_fmt: str | None = None) -> str:
    """The :class:`~asicsim._src.numerics.mac.MacSpec` text of ``gpu``'s tensor cores for ``a_fmt``
    (and ``b_fmt``) inputs and ``out`` results (:func:`asicsim.numerics.tensor_core` parses it);
    ``b_fmt`` is ``a_fmt``, or the other fp8 format (:data:`MIXED_FP8`)."""
    try:
        key = (str(gpu).strip().lower(), _fmt(a_fmt), _fmt(out))
        b = key[1] if b_fmt is None else _fmt(b_fmt)
        if b != key[1] and not {b, key[1]} <= set(MIXED_FP8):
            raise KeyError(b_fmt)
    except Exception:  # an unknown format name is an unsupported combination too
        key = None
    if key not in PRESETS or (b != key[1] and (key[0], b, key[2]) not in PRESETS):
        raise ValueError(
            f"tensor_core(gpu={gpu!r}, a={a_fmt!r}, b={b_fmt!r}, out={out!r}): no published model; "
            f"supported (gpu/a/out, b = a): {', '.join(supported())}; with an fp8 a, b may be the other fp8 format"
        )
    return PRESETS[key][0] + ("" if b == key[1] else f",b={b}")


def source(gpu: str, a_fmt: str, out: str = "fp32") -> str:
    """Where the preset's parameters come from (repository, commit, model file)."""
    preset_text(gpu, a_fmt, out)
    return PRESETS[str(gpu).strip().lower(), _fmt(a_fmt), _fmt(out)][1]
