"""The ``designs/`` catalog: reading design TOML files and SCALE-Sim ``.cfg`` files.

``load_design`` accepts a catalog name (``designs/<name>.toml``), a path to a user's TOML file
written like the shipped ones, or a SCALE-Sim ``.cfg`` (array, dataflow and SRAM sizes come from
the file; what SCALE-Sim does not state gets the documented defaults below). Unknown keys are
errors, and every problem of a file is reported at once, with its field path, e.g.
``buffers.unified.capacity_kib``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import tomllib
from pathlib import Path
from typing import Any

from asicsim._catalogs import shipped_dir
from asicsim._files import TextFileError, beside, read_text_file
from asicsim._src.hw.design import (
    ArraySpec,
    BufferSpec,
    DramSpec,
    PESpec,
    SystolicDesign,
    VectorUnitSpec,
)
from asicsim._src.hw.design_checks import DesignError, Problem
from asicsim._src.hw.gpu import GpuDesign, gpu_design_from_table
from asicsim._src.hw.power_spec import PowerSpec
from asicsim._src.hw.scalesim_files import ScaleSimFileError, read_scalesim_config

#: What a SCALE-Sim config does not say, and what a converted design assumes.
#: SCALE-Sim sizes its SRAMs in words of ``word_size = 1`` byte, so int8 operands keep its capacities
#: meaning the same element counts; products accumulate in int32 inside the PE (as int8 accelerators
#: do) and the ofmap SRAM holds one 8-bit word per output, as SCALE-Sim counts it.
SCALESIM_DEFAULTS: dict[str, Any] = {
    "a_format": "int8",
    "b_format": "int8",
    "acc_format": "int32",
    "word_bits": 8,
    "technology_nm": 45,  # the node of the Horowitz (ISSCC 2014) energy table: no node scaling
    "clock_mhz": 1000,  # SCALE-Sim counts cycles only; 1 GHz makes a cycle 1 ns
    "dram_kind": "DDR4",
    "double_buffered": True,  # SCALE-Sim's scratchpads are double-buffered
}


def designs_dir() -> Path:
    """The shipped ``designs/`` folder (inside the wheel, or at the repository root)."""
    return shipped_dir("designs")


DESIGN_KINDS = ("systolic", "gpu")


def _file_kind(path: Path) -> str:
    """A design file's ``kind`` (``"systolic"`` when it has none), read from its top-level lines."""
    for line in read_text_file(path).splitlines():
        if line.startswith("["):
            break
        key, eq, value = line.partition("=")
        if eq and key.strip() == "kind":
            return value.split("#")[0].strip().strip("\"'")
    return "systolic"


def list_designs(kind: str | None = "systolic") -> list[str]:
    """Names of the shipped designs (``designs/*.toml``) of one ``kind``: ``"systolic"`` (the
    default: the array model's designs), ``"gpu"`` (the GPU baseline) or None for all."""
    if kind is not None and kind not in DESIGN_KINDS:
        raise ValueError(f"list_designs: kind = {kind!r}; allowed: {' | '.join(DESIGN_KINDS)} or None")
    return sorted(p.stem for p in designs_dir().glob("*.toml") if kind is None or _file_kind(p) == kind)


def _field_names(cls: type) -> tuple[set[str], set[str]]:
    """(all fields, required fields) of a spec dataclass."""
    fields = dataclasses.fields(cls)
    required = {f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return {f.name for f in fields}, required


def _build(cls: type, table: Any, path: str, out: list[Problem], *, skip: frozenset = frozenset(),
           extra: dict | None = None) -> Any:
    """Check one TOML table against ``cls`` (appending problems with ``path.`` prefixes).

    Returns the kwargs, checked, or None when the table is not a table. ``skip`` names nested
    fields the caller builds; ``extra`` adds values that are not in the table (a buffer's name).
    """
    prefix = f"{path}." if path else ""
    if not isinstance(table, dict):
        out.append((path, table, "a table"))
        return None
    names, required = _field_names(cls)
    given = dict(extra or {})
    for key, value in table.items():
        if key not in names:
            allowed = sorted(names - set(extra or {}))
            out.append((prefix + key, value, f"no such field; fields are {allowed}"))
        else:
            given[key] = value
    for key in sorted(required - set(given) - skip):
        out.append((prefix + key, "<missing>", "a value (required)"))
    own = {k: v for k, v in given.items() if k not in skip}
    out.extend((prefix + f, v, a) for f, v, a in cls.problems(own))
    return given


def design_from_table(table: dict, source: str = "<table>") -> SystolicDesign:
    """Build a design from a parsed TOML table, reporting every problem in one DesignError."""
    out: list[Problem] = []
    nested = frozenset({"array", "pe", "buffers", "dram", "vector", "power"})
    top = _build(SystolicDesign, table, "", out, skip=nested)
    if top is None:
        raise DesignError(out, source)
    parts: dict[str, Any] = {}
    for key, cls in (("array", ArraySpec), ("pe", PESpec), ("dram", DramSpec),
                     ("vector", VectorUnitSpec), ("power", PowerSpec)):
        if key in top:
            parts[key] = _build(cls, top[key], key, out)
    for key in ("array", "pe", "dram"):
        if key not in top:
            out.append((key, "<missing>", f"a [{key}] table (required)"))
    buffers = top.get("buffers", "<missing>")
    built_buffers = []
    if not isinstance(buffers, dict) or not buffers:  # the cost model needs a home per operand
        out.append(("buffers", buffers, "one or more [buffers.<name>] tables (required)"))
    else:
        for name, btable in buffers.items():
            kw = _build(BufferSpec, btable, f"buffers.{name}", out, extra={"name": name})
            built_buffers.append(kw)
    if out:
        raise DesignError(out, source)
    objs = {k: cls(**parts[k]) for k, cls in (("array", ArraySpec), ("pe", PESpec),
                                             ("dram", DramSpec), ("vector", VectorUnitSpec),
                                             ("power", PowerSpec))
            if k in parts}
    objs["buffers"] = tuple(BufferSpec(**kw) for kw in built_buffers)
    kwargs = {k: v for k, v in top.items() if k not in nested} | objs
    try:
        return SystolicDesign(**kwargs)
    except DesignError as err:  # cross-field problems (e.g. duplicate buffer names)
        raise DesignError(err.problems, source) from None


def load_design_file(path: str | Path) -> SystolicDesign | GpuDesign:
    """Read one design TOML file (see ``designs/*.toml``); ``kind = "gpu"`` gives a GpuDesign."""
    path = Path(path)
    try:
        table = tomllib.loads(read_text_file(path))
    except OSError as err:
        raise DesignError([("<file>", str(path), f"a readable file ({err.strerror})")]) from None
    except TextFileError as err:
        raise DesignError([("<file>", str(path), f"a UTF-8 text file ({err})")], str(path)) from None
    except tomllib.TOMLDecodeError as err:
        raise DesignError([("<file>", str(path), f"valid TOML ({err})")], str(path)) from None
    return design_from_any_table(formats_beside(table, path.parent), str(path))


def formats_beside(table: dict, folder: Path) -> dict:
    """The table with the format files its ``[pe]`` and ``[[pe.modes]]`` name resolved against
    the design file's folder (:func:`asicsim._files.beside`)."""
    pe = table.get("pe")
    if not isinstance(pe, dict):
        return table
    pe = {k: beside(v, folder) if k in ("a_format", "b_format", "acc_format") else v for k, v in pe.items()}
    if isinstance(pe.get("modes"), list):
        pe["modes"] = [{k: beside(v, folder) if k in ("a", "b", "acc") else v for k, v in m.items()}
                       if isinstance(m, dict) else m for m in pe["modes"]]
    return {**table, "pe": pe}


def design_from_any_table(table: dict, source: str = "<table>") -> SystolicDesign | GpuDesign:
    """A design of the ``kind`` the table names (``"systolic"``, the default, or ``"gpu"``)."""
    kind = table.get("kind", "systolic")
    if kind == "gpu":
        return gpu_design_from_table(table, source)
    if kind != "systolic":
        raise DesignError([("kind", kind, "'systolic' (or omitted) | 'gpu'")], source)
    return design_from_table({k: v for k, v in table.items() if k != "kind"}, source)


def design_from_scalesim_config(path: str | Path) -> SystolicDesign:
    """Convert a SCALE-Sim ``.cfg``: array, dataflow and SRAM sizes from the file, the rest from
    :data:`SCALESIM_DEFAULTS`. The DRAM bandwidth is SCALE-Sim's ``Bandwidth`` (words per cycle,
    10 when absent, as SCALE-Sim) times the 1-byte word times the assumed clock."""
    try:
        cfg = read_scalesim_config(path)
    except ScaleSimFileError as err:
        raise DesignError([("<file>", str(path), f"a SCALE-Sim config ({err})")], str(path)) from None
    try:
        return _scalesim_design(cfg, path)
    except DesignError as err:  # e.g. an empty run_name
        raise DesignError(err.problems, str(path)) from None


def _scalesim_design(cfg, path: str | Path) -> SystolicDesign:
    d = SCALESIM_DEFAULTS
    buffers = tuple(
        BufferSpec(name=f"{op}_sram", holds=(op,), capacity_kib=kib, word_bits=d["word_bits"],
                   double_buffered=d["double_buffered"])
        for op, kib in (("ifmap", cfg.ifmap_sram_kib), ("filter", cfg.filter_sram_kib),
                        ("ofmap", cfg.ofmap_sram_kib)))
    return SystolicDesign(
        name=cfg.run_name,
        description=f"converted from SCALE-Sim config {Path(path).name}; formats, node, clock and "
                    "DRAM are asicsim's SCALE-Sim defaults (SCALESIM_DEFAULTS)",
        source=str(path),
        technology_nm=d["technology_nm"],
        clock_mhz=d["clock_mhz"],
        array=ArraySpec(rows=cfg.rows, cols=cfg.cols, dataflow=cfg.dataflow),
        pe=PESpec(a_format=d["a_format"], b_format=d["b_format"], acc_format=d["acc_format"]),
        buffers=buffers,
        dram=DramSpec(kind=d["dram_kind"],
                      bandwidth_gbps=cfg.bandwidth_words * d["word_bits"] / 8 * d["clock_mhz"] / 1e3),
    )


@functools.cache
def _catalog_design(name: str) -> SystolicDesign | GpuDesign:
    return load_design_file(designs_dir() / f"{name}.toml")


def load_design(design: str | Path | SystolicDesign | GpuDesign) -> SystolicDesign | GpuDesign:
    """A design by catalog name, TOML path or SCALE-Sim ``.cfg`` path (a design passes through);
    a ``kind = "gpu"`` file gives a :class:`~asicsim._src.hw.gpu.GpuDesign`."""
    if isinstance(design, (SystolicDesign, GpuDesign)):
        return design
    if not isinstance(design, (str, Path)):
        raise DesignError([("design", design, "a catalog name, a .toml or .cfg path, or a "
                                              "SystolicDesign")])
    text = str(design)
    if isinstance(design, Path) or text.endswith((".toml", ".cfg")) or "/" in text:
        path = Path(design)
        if not path.is_file():
            raise DesignError([("design", text, "an existing .toml or .cfg file")])
        return design_from_scalesim_config(path) if path.suffix == ".cfg" else load_design_file(path)
    if (designs_dir() / f"{text}.toml").is_file():  # one stat, not a folder scan
        return _catalog_design(text)
    names = list_designs(None)
    if text not in names:
        close = difflib.get_close_matches(text, names, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        raise DesignError([("design", text, f"{hint}one of {names}, or a .toml/.cfg path")])
    return _catalog_design(text)



def labelled_designs(designs) -> list[tuple[str, SystolicDesign | GpuDesign]]:
    """(label, design) for one design or a list of them as given (catalog names, .toml/.cfg paths,
    design objects), each loaded. A table's label for a design is the name or path as given, as a
    sweep spec's ``designs`` list labels its designs: a copied file that keeps ``name =
    "edge_int8_32x32"`` goes by its path, never by the catalog design's name; a design object goes
    by its name. Two different designs under one label are a :class:`DesignError`."""
    given = [designs] if isinstance(designs, (str, Path, SystolicDesign, GpuDesign)) else list(designs)
    out: list[tuple[str, SystolicDesign | GpuDesign]] = []
    seen: dict[str, SystolicDesign | GpuDesign] = {}
    for g in given:
        d = load_design(g)
        label = str(g) if isinstance(g, (str, Path)) else d.name
        if seen.setdefault(label, d) != d:
            raise DesignError([("design", label, "one design per label: two different designs are named "
                                                 "alike; rename one")])
        out.append((label, d))
    return out
