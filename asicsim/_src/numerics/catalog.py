"""Format names: the ``e{E}m{M}`` / ``int{N}`` / ``q{I}.{F}`` grammar and the TOML catalog.

``get_format`` accepts a spec, a catalog name or alias, a grammar name, or a path to a TOML file
written like the ones in ``formats/``. Names follow ml_dtypes: ``float8_e4m3fn`` is the same spec
as ``e4m3fn`` (OCP E4M3, max 448), while a bare ``e4m3`` is IEEE-like (max 240).
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from pathlib import Path
from typing import Any

from asicsim._catalogs import shipped_dir
from asicsim._files import TextFileError, beside, read_text_file

from .formats import (
    BlockFormat,
    FloatFormat,
    Format,
    FormatError,
    IntFormat,
    default_bias,
)

_FLOAT_RE = re.compile(
    r"^(?:float(?P<w>\d+)_)?e(?P<e>\d+)m(?P<m>\d+)(?:b(?P<b1>\d+))?(?P<suf>fnuz|fnu|fn)?(?:b(?P<b2>\d+))?$"
)
_INT_RE = re.compile(r"^(?P<u>u?)int(?P<n>\d+)$")
_FIXED_RE = re.compile(r"^(?P<u>u?)q(?P<i>\d+)\.(?P<f>\d+)$")

_FLOAT_KEYS = {"exp_bits", "man_bits", "bias", "nan", "signed", "subnormals", "has_zero", "saturate"}
_INT_KEYS = {"bits", "signed", "frac_bits", "symmetric", "saturate"}
_BLOCK_KEYS = {"element", "scale", "block_size", "scale_rule", "tensor_scale"}
_COMMON_KEYS = {"name", "aliases", "kind", "spec", "description", "source"}


def catalog_dir() -> Path:
    """The shipped ``formats/`` folder (inside the wheel, or at the repository root)."""
    return shipped_dir("formats")


def parse_name(name: str) -> Format:
    """Build a spec from the grammar alone (no catalog)."""
    key = name.strip().lower()
    if m := _FLOAT_RE.match(key):
        e, mant = int(m["e"]), int(m["m"])
        suffix = m["suf"] or ""
        signed = suffix != "fnu"
        bits = int(signed) + e + mant
        if m["w"] is not None and int(m["w"]) != bits:
            raise FormatError(
                f"format name {name!r}: prefix says {m['w']} bits but e{e}m{mant} "
                f"{'un' if not signed else ''}signed has {bits}"
            )
        if suffix == "":
            nan = "ieee"
        elif suffix == "fnuz":
            nan = "negzero"
        else:  # fn / fnu: one NaN at all-ones for 8 bits and wider, none below (ml_dtypes/LLVM)
            nan = "ones" if bits >= 8 else "none"
        if m["b1"] and m["b2"]:
            raise FormatError(f"format name {name!r}: the bias is given twice")
        bias_text = m["b1"] or m["b2"]
        bias = int(bias_text) if bias_text else default_bias(e, nan)
        pure_exponent = not signed and mant == 0  # e8m0fnu: no zero, no subnormals
        return FloatFormat(
            name=key,
            exp_bits=e,
            man_bits=mant,
            bias=bias,
            nan=nan,
            signed=signed,
            subnormals=not pure_exponent,
            has_zero=not pure_exponent,
        )
    if m := _INT_RE.match(key):
        return IntFormat(name=key, bits=int(m["n"]), signed=not m["u"])
    if m := _FIXED_RE.match(key):
        signed = not m["u"]
        i, f = int(m["i"]), int(m["f"])
        return IntFormat(name=key, bits=int(signed) + i + f, signed=signed, frac_bits=f)
    raise _NoGrammarMatch(f"unknown format {name!r}")


class _NoGrammarMatch(FormatError):
    """The name fits none of the grammar's patterns (as opposed to fitting with bad values)."""


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise FormatError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _spec_from_table(table: dict[str, Any], where: str, resolve) -> Format:
    """Turn one catalog table (a parsed TOML file) into a spec; every error names ``where``."""
    kind = table.get("kind")
    if kind not in ("float", "int", "block"):
        raise FormatError(f"{where}: field 'kind' = {kind!r}; allowed: 'float', 'int', 'block'")
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError(f"{where}: field 'name' must be a non-empty string, got {name!r}")
    aliases = table.get("aliases", [])
    if not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
        raise FormatError(f"{where}: field 'aliases' = {aliases!r}; allowed: a list of strings")
    extra = {"description": table.get("description", ""), "source": table.get("source", "")}
    own = {"float": _FLOAT_KEYS, "int": _INT_KEYS, "block": _BLOCK_KEYS}[kind]
    _check_keys(table, _COMMON_KEYS | own, where)
    params = {k: table[k] for k in own if k in table}
    try:
        if kind == "block":
            return _block_from_table(table, name, params, extra, where, resolve)
        spec_text = table.get("spec")
        if spec_text is not None and not isinstance(spec_text, str):
            raise FormatError(f"field 'spec' = {spec_text!r}; allowed: a format name such as 'e4m3'")
        base = parse_name(spec_text) if spec_text is not None else None
        if base is not None and base.kind != kind:
            raise FormatError(f"spec {spec_text!r} is a {base.kind} format, not {kind}")
        required = {"float": ("exp_bits", "man_bits"), "int": ("bits",)}[kind]
        missing = [k for k in required if base is None and k not in params]
        if missing:
            raise FormatError(f"field(s) {missing} missing (or give 'spec', e.g. spec = 'e4m3')")
        if kind == "float":
            fields = (
                {k: getattr(base, k) for k in _FLOAT_KEYS} if base else {"nan": "ieee"}
            ) | params
            if "bias" not in fields:  # a mistyped width is reported by the spec, not here
                e, nan = fields["exp_bits"], fields.get("nan", "ieee")
                fields["bias"] = default_bias(e, nan) if type(e) is int and isinstance(nan, str) else 0
            return FloatFormat(name=name, **fields, **extra)
        fields = ({k: getattr(base, k) for k in _INT_KEYS} if base else {}) | params
        return IntFormat(name=name, **fields, **extra)
    except FormatError as err:
        raise FormatError(f"{where}: {err}") from None


def _block_from_table(table, name, params, extra, where, resolve) -> BlockFormat:
    element = params.pop("element", None)
    if isinstance(element, dict):
        element = _spec_from_table({"name": f"{name}.element", **element}, f"{where} [element]", resolve)
    elif isinstance(element, str):
        element = resolve(element)
    else:
        raise FormatError(f"field 'element' = {element!r}; allowed: a format name or a table")
    scale = params.pop("scale", "float8_e8m0fnu")
    if not isinstance(scale, str):
        raise FormatError(f"field 'scale' = {scale!r}; allowed: a format name such as 'e8m0fnu'")
    scale = resolve(scale)
    tensor_scale = params.pop("tensor_scale", None)
    if tensor_scale is not None and not isinstance(tensor_scale, str):
        raise FormatError(f"field 'tensor_scale' = {tensor_scale!r}; allowed: a format name such as 'float32'")
    if tensor_scale is not None:
        params["tensor_scale"] = resolve(tensor_scale)
    if params.get("block_size") == "tensor":  # TOML has no null: one scale per tensor
        params["block_size"] = None
    return BlockFormat(name=name, element=element, scale=scale, **params, **extra)


def _read_table(path: Path) -> dict[str, Any]:
    """The parsed TOML of a format file; unreadable bytes or bad TOML are a FormatError naming it."""
    try:
        return tomllib.loads(read_text_file(path))
    except TextFileError as err:
        raise FormatError(str(err)) from None
    except tomllib.TOMLDecodeError as err:
        raise FormatError(f"{path}: not valid TOML: {err}") from None


def _self_reference(chain: list[str], again: str) -> FormatError:
    """The error for a block format whose element leads back to a format being built: ``chain``
    holds those (files or catalog names, outermost first), ``again`` the one met again."""
    loop = " -> ".join([*chain[chain.index(again):], again])
    return FormatError(f"a block format refers back to itself ({loop}); its element must be a "
                       "float or integer format")


def load_format_file(path: str | Path, _chain: tuple[Path, ...] = ()) -> Format:
    """Read one format TOML file (see ``formats/*.toml``). A block format's ``element`` or
    ``scale`` may name another file; ``_chain`` holds the files being read, so a file that
    refers back to itself is an error, not endless recursion."""
    path = Path(path)
    key = path.resolve()
    if key in _chain:
        raise _self_reference([str(p) for p in _chain], str(key))
    table = _read_table(path)

    def resolve(name: str) -> Format:
        name = beside(name, path.parent)  # relative to this file's folder
        if name.endswith(".toml"):
            if not Path(name).is_file():
                raise FormatError(f"format file {name!r} does not exist")
            return load_format_file(name, (*_chain, key))
        return get_format(name)

    return _spec_from_table(table, str(path), resolve)


@functools.cache
def _catalog() -> tuple[dict[str, Format], dict[str, str]]:
    """All shipped formats by canonical name, and every alias -> canonical name."""
    specs: dict[str, Format] = {}
    names: dict[str, str] = {}
    tables = {}
    for path in sorted(catalog_dir().glob("*.toml")):
        table = _read_table(path)
        if not isinstance(table.get("name"), str):
            raise FormatError(f"{path}: field 'name' must be a non-empty string, got {table.get('name')!r}")
        tables[table["name"]] = (path, table)
        for alias in [table["name"], *table.get("aliases", [])]:
            key = alias.lower()
            if key in names:
                raise FormatError(f"{path}: alias {alias!r} is already used by {names[key]!r}")
            names[key] = table["name"]

    pending: list[str] = []  # formats being built: an element naming one of them is a loop

    def resolve(name: str) -> Format:
        canonical = names.get(name.lower())
        if canonical is None:
            return parse_name(name)
        if canonical in pending:
            raise _self_reference(pending, canonical)
        if canonical not in specs:
            path, table = tables[canonical]
            pending.append(canonical)
            try:
                specs[canonical] = _spec_from_table(table, str(path), resolve)
            finally:
                pending.pop()
        return specs[canonical]

    for canonical in tables:
        resolve(canonical)
    return specs, names


def catalog() -> dict[str, Format]:
    """The shipped formats, by canonical name."""
    return dict(_catalog()[0])


def aliases() -> dict[str, str]:
    """Every shipped name and alias (lower case) -> canonical name."""
    return dict(_catalog()[1])


@functools.lru_cache(maxsize=1024)
def _get_by_name(name: str) -> Format:
    specs, names = _catalog()
    canonical = names.get(name.lower())
    if canonical is not None:
        return specs[canonical]
    try:
        spec = parse_name(name)
    except _NoGrammarMatch:
        close = difflib.get_close_matches(name.lower(), list(names), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise FormatError(
            f"unknown format {name!r}{hint} (names: `asicsim formats`; grammar: "
            "e{E}m{M}[fn|fnuz|fnu][b{bias}], int{N}, uint{N}, q{I}.{F}, uq{I}.{F}; "
            "or a path to a .toml file)"
        ) from None
    # A grammar name that matches a catalog spec returns the catalog entry (same spec, its name).
    for known in specs.values():
        if _same_numbers(known, spec):
            return known
    return spec


def _same_numbers(a: Format, b: Format) -> bool:
    if a.kind != b.kind or a.kind == "block":
        return False
    keys = _FLOAT_KEYS if a.kind == "float" else _INT_KEYS
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def get_format(fmt: str | Path | Format) -> Format:
    """Resolve a spec, catalog name/alias, grammar name or TOML path to a frozen spec."""
    if isinstance(fmt, (FloatFormat, IntFormat, BlockFormat)):
        return fmt
    if isinstance(fmt, Path) or (isinstance(fmt, str) and fmt.endswith(".toml")):
        path = Path(fmt)
        if not path.is_file():
            raise FormatError(f"format file {str(path)!r} does not exist")
        return load_format_file(path)
    if not isinstance(fmt, str):
        raise FormatError(
            f"format must be a name, a path or a spec, got {type(fmt).__name__}: {fmt!r}"
        )
    return _get_by_name(fmt)
