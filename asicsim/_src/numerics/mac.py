"""The MAC model: how a dot product is multiplied, accumulated and rounded.

A :class:`MacSpec` says what a processing element does with ``a[i, k] * b[k, j]``:

* operands are first rounded (rne) onto ``a_fmt`` / ``b_fmt``;
* the product is exact (``product=None``, the default) or rounded onto ``product``; with
  ``fused=False`` and no ``product`` format it is rounded onto the accumulator format;
* every addition is rounded once onto ``acc`` with ``acc_rounding`` (an integer ``acc`` adds
  exactly and wraps or saturates at every step, ``overflow``);
* ``order`` fixes which additions happen:

  ``sequential``     output-stationary PE: ``acc = round(acc + p_k)`` for k = 0..K-1, from +0.
  ``folded:R``       weight-stationary column of R PEs: each fold of R consecutive k's is summed
                     from zero down the column (rounding each step); each fold's partial is then
                     added into the accumulator (rounding).
  ``chunk:C``        chunk-based accumulation (Wang et al., NeurIPS 2018): each chunk of C products
                     summed sequentially from zero, the chunk sums accumulated sequentially. It is
                     the same arithmetic as ``folded:C``; both names are kept for the two stories.
  ``tree``           pairwise tree: adjacent pairs added (rounding at every node) level by level;
                     an odd last element moves up unchanged.
  ``tensorcore:k``   an NVIDIA-style block FMA (Fasi, Higham, Mikaitis & Pranesh, PeerJ CS 2021):
                     see :mod:`asicsim._src.numerics.tensorcore`; ``guard_bits``/``carry_bits`` and
                     the ``tc_*`` options apply; GPU presets: ``gpu=`` (:mod:`.tc_presets`).
  ``fast``           ``jnp.dot`` in float32 then one rounding onto ``out``. NOT bit-exact: a
                     quick approximation for large sweeps.

* ``out`` (default ``acc``) is a last rounding of the result (``out_rounding``, default
  ``acc_rounding``).
* ``saturate`` says how every one of those float roundings treats overflow, as hardware that
  saturates does throughout: ``True`` clamps to the format's largest finite value at each of them
  -- the operands (1000 onto e4m3fn is 448, not NaN), the product, every accumulation step and
  the out rounding; ``False`` never clamps (inf, or NaN in formats without inf); ``None`` (the
  default) keeps each format's own convention at each step. An integer accumulator takes
  ``overflow`` instead (``saturate`` is refused there).

Every exact order is checked bit for bit against the scalar model in :mod:`.mac_ref`.
IEEE signed-zero rules hold: an exact zero sum is +0 (-0 under ``rdn``) unless both addends are -0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .catalog import get_format
from .mac_checks import ORDERS as ORDERS
from .mac_checks import TC_EXPONENTS as TC_EXPONENTS
from .mac_checks import TC_FLUSH as TC_FLUSH
from .mac_checks import check_mac, parse_order
from .tc_presets import preset_text

#: Tensor-core presets by GPU name: fp16 operands, fp32 results, as the GPU's measured inner
#: products and Khattak & Mikaitis's models give them (every GPU and format: ``gpu=`` below and
#: :mod:`.tc_presets`, where the sources are named).
PRESETS = {name: f"gpu={name},a=fp16,out=fp32" for name in ("v100", "a100", "h100")}

_KEYS = {
    "a": "a_fmt", "a_fmt": "a_fmt", "b": "b_fmt", "b_fmt": "b_fmt", "acc": "acc",
    "order": "order", "fused": "fused", "product": "product",
    "product_rounding": "product_rounding", "rounding": "acc_rounding",
    "acc_rounding": "acc_rounding", "out": "out", "out_rounding": "out_rounding",
    "saturate": "saturate", "overflow": "overflow", "guard": "guard_bits",
    "guard_bits": "guard_bits", "carry_bits": "carry_bits", "tc_exponent": "tc_exponent",
    "tc_min_exp": "tc_min_exp", "tc_sticky": "tc_sticky", "tc_flush": "tc_flush",
    "tc_product_limit": "tc_product_limit", "tc_late_c": "tc_late_c", "gpu": "gpu",
}  # fmt: skip
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True, kw_only=True)
class MacSpec:
    """A multiply-accumulate unit; frozen and hashable, so usable as a ``jax.jit`` static arg."""

    a_fmt: object = "fp32"
    b_fmt: object = None  # None: same as a_fmt
    acc: object = "fp32"
    order: str = "sequential"
    fused: bool = True
    product: object = None  # None: exact product (or the acc format when fused=False)
    product_rounding: str = "rne"
    acc_rounding: str = "rne"
    out: object = None  # None: same as acc
    out_rounding: str | None = None  # None: same as acc_rounding
    saturate: bool | None = None  # every rounding: operands, product, each add, out (see above)
    overflow: str = "wrap"  # integer accumulators: "wrap" or "saturate"
    guard_bits: int = 0  # tensorcore: alignment bits kept below the acc significand (may be < 0)
    carry_bits: int = 2  # tensorcore: headroom bits above it (see tensorcore.py)
    tc_exponent: str = "product"  # tensorcore: a product's alignment exponent (see tensorcore.py)
    tc_min_exp: int | None = None  # tensorcore: lower limit of the block's alignment exponent
    tc_sticky: bool = False  # tensorcore: one sticky bit per aligned addend
    tc_flush: str = "none"  # tensorcore: flush subnormals: none, in (operands), out (c, d), both
    tc_product_limit: bool = False  # tensorcore: a product >= 2**(acc emax + 1) overflows
    tc_late_c: str | None = None  # tensorcore: c added after the products, rounded so (see tensorcore.py)

    def __post_init__(self) -> None:
        check_mac(self)

    def _parse_order(self) -> tuple[str, int | None]:
        return parse_order(self.order)

    # --- derived -------------------------------------------------------------------------
    @property
    def order_kind(self) -> str:
        return self._parse_order()[0]

    @property
    def order_size(self) -> int | None:
        return self._parse_order()[1]

    def spec(self, name: str):
        """The resolved format of field ``name`` (out and product fall back as documented)."""
        if name == "out" and self.out is None:
            name = "acc"
        if name == "product" and self.product is None:
            return None if self.fused else get_format(self.acc)
        return get_format(getattr(self, name))

    @property
    def integer(self) -> bool:
        return get_format(self.acc).kind == "int"

    @property
    def product_rnd(self) -> str:
        return self.product_rounding if self.product is not None else self.acc_rounding

    @property
    def final_rounding(self) -> str:
        return self.out_rounding or self.acc_rounding

    # --- text form -----------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | MacSpec) -> MacSpec:
        """``"a=bf16,b=bf16,acc=fp32,order=sequential"``; a leading preset (``v100``, ``a100``,
        ``h100``) may be followed by overrides: ``"a100,acc_rounding=rne"``. ``gpu=`` names a
        GPU's tensor cores (:func:`tensor_core`) for the ``a``/``b`` and ``out``
        formats given (``out`` fp32 unless given): ``"gpu=h100,a=fp8_e4m3,out=fp32"``; other
        keys then override the preset's fields."""
        if isinstance(text, MacSpec):
            return text
        kwargs: dict = {}
        items = [t.strip() for t in str(text).split(",") if t.strip()]
        if items and "=" not in items[0]:
            preset = items.pop(0).lower()
            if preset not in PRESETS:
                raise ValueError(f"MacSpec {text!r}: unknown preset {preset!r}; known: {', '.join(PRESETS)}")
            items = PRESETS[preset].split(",") + items
        for item in items:
            key, sep, value = (s.strip() for s in item.partition("="))
            if not sep or key.lower() not in _KEYS:
                raise ValueError(
                    f"MacSpec {text!r}: cannot read {item!r}; keys: {', '.join(sorted(_KEYS))}"
                )
            if key.lower() == "gpu":
                kwargs["gpu"] = value
                continue
            field = _KEYS[key.lower()]
            kwargs[field] = _convert(field, value, text)
        if "gpu" in kwargs:
            return _from_gpu(kwargs, text)
        return cls(**kwargs)

    def __str__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default or f.name in ("a_fmt", "acc", "order"):
                value = getattr(value, "name", value)
                parts.append(f"{f.name}={'none' if value is None else str(value).lower()}")
        return ",".join(parts)


def _convert(field: str, value: str, text):
    low = value.lower()
    if field in ("fused", "saturate", "tc_sticky", "tc_product_limit"):
        if field == "saturate" and low == "none":
            return None
        if low not in _BOOLS:
            raise ValueError(f"MacSpec {text!r}: {field}={value!r} is not a boolean")
        return _BOOLS[low]
    if field == "tc_min_exp" and low == "none":
        return None
    if field in ("guard_bits", "carry_bits", "tc_min_exp"):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"MacSpec {text!r}: {field}={value!r} is not an integer") from None
    if field in ("product", "out", "out_rounding", "b_fmt", "tc_late_c") and low == "none":
        return None
    return value


def tensor_core(gpu: str, a_fmt: str, out: str = "fp32", b_fmt: str | None = None) -> MacSpec:
    """The MAC of ``gpu``'s tensor cores for ``a_fmt`` (and ``b_fmt``) inputs and ``out`` results,
    from the published models (:mod:`.tc_presets` names each preset's source); an unsupported
    combination is an error listing the supported ones.

    >>> tensor_core("h100", "fp8_e4m3").order
    'tensorcore:32'
    """
    return MacSpec.parse(preset_text(gpu, a_fmt, out, b_fmt))


def _from_gpu(kwargs: dict, text) -> MacSpec:
    gpu = kwargs.pop("gpu")
    if "a_fmt" not in kwargs:
        raise ValueError(f"MacSpec {text!r}: gpu={gpu} needs the input format, e.g. a=fp16")
    out = kwargs.pop("out", None) or "fp32"
    base = tensor_core(gpu, kwargs.pop("a_fmt"), out=out, b_fmt=kwargs.pop("b_fmt", None))
    return dataclasses.replace(base, **kwargs) if kwargs else base


def as_mac(mac) -> MacSpec:
    return mac if isinstance(mac, MacSpec) else MacSpec.parse(mac)
