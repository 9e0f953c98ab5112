"""Number-format specs: frozen, hashable records whose derived numbers are properties.

Three kinds of format share one vocabulary (numpy ``finfo`` names: ``bits``, ``max``,
``smallest_normal``, ``smallest_subnormal``, ``eps``, ``nmant``, ``nexp``):

* :class:`FloatFormat` -- ``e{E}m{M}`` binary floats with IEEE-like, ``fn``, ``fnuz`` or ``fnu``
  conventions (see ``NanPolicy``).
* :class:`IntFormat` -- two's-complement integers and fixed point ``q{I}.{F}`` / ``uq{I}.{F}``.
* :class:`BlockFormat` -- an element format sharing one power-of-two scale per block (OCP MX,
  shared-exponent block floating point, Flexpoint).

Every value of every format must be exactly representable in float32 (the carrier that
``quantize`` returns), so wider formats are refused here, at construction, with the reason.

This module is where the format types are imported from; each kind is defined in its own module
(:mod:`~asicsim._src.numerics.float_format`, :mod:`~asicsim._src.numerics.int_format`,
:mod:`~asicsim._src.numerics.block_format`; what they share in :mod:`~asicsim._src.numerics.format_checks`).
"""

from __future__ import annotations

from .block_format import BlockFormat as BlockFormat
from .block_format import element_qmin as element_qmin
from .block_format import emax_of as emax_of
from .float_format import FloatFormat as FloatFormat
from .float_format import NanPolicy as NanPolicy
from .float_format import default_bias as default_bias
from .float_format import values_fit as values_fit
from .format_checks import BLOCK_SIZES as BLOCK_SIZES
from .format_checks import MAX_BLOCK_SIZE as MAX_BLOCK_SIZE
from .format_checks import FormatError as FormatError
from .format_checks import check_field_types as check_field_types
from .format_checks import word_storage_bits as word_storage_bits
from .int_format import IntFormat as IntFormat

Format = FloatFormat | IntFormat | BlockFormat
