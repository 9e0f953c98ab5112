"""Bit-accurate number formats: specs, rounding, quantize/encode/decode, arithmetic, the MAC model.

The names below are the supported surface; the modules behind them live in
``asicsim._src.numerics`` and may change without notice.
"""

from asicsim._lazy import public_facade

public_facade(__name__, "asicsim._src.numerics")
