"""Full-tensor passes per GEMM operand in a compiled training step (issue 37 item 2, CPU side).

An emulated step is slower than the native one where it reads and writes whole tensors more
often around its GEMMs (amax, scale, round, cast back). This counts that traffic in XLA's
*optimised* HLO, the program that runs:

* **GEMM instructions**: ``dot`` and ``convolution``, a fusion whose fused computation holds one
  (XLA:CPU's ``__ynn_fusion``, XLA:GPU's Triton GEMM fusions) and a library ``custom-call``
  (cuBLAS, cuDNN, oneDNN). Their operand bytes are the *GEMM operand bytes*.
* **Passes**: every other instruction of the computations that run at top level (the entry and
  the bodies of ``while``, ``conditional`` and ``call``; the inside of a fusion is one pass),
  charged the bytes it reads (each operand once) and writes. ``passes = traffic / (2 x GEMM
  operand bytes)`` of the native step (a recipe that emulates its MAC order in loops has no
  ``dot`` but the same GEMMs to feed): one pass that reads and writes a copy of every GEMM
  operand counts 1. A loop body counts once (trip counts are not known from the text).

The figure for a recipe is compared with the native bf16 step of the same model in the same run
(``passes_x``); compile time likewise. ``python benchmarks/hlo_passes.py [--quick] [--model
transformer] [--recipes a,b]`` prints the table for benchmarks/RESULTS.md;
``benchmarks/gpu_emulate.py`` runs it (the MLP) as one part on the device.
"""

from __future__ import annotations

import argparse
import re
import time

ITEM_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
              "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
FREE_OPS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while", "conditional", "call",
            "after-all", "partition-id", "replica-id", "iota"}
GEMM_TARGET = re.compile(r"gemm|matmul|cublas|cudnn|onednn|dot|conv", re.I)
_ARRAY = re.compile(r"\b([a-z]+[0-9a-z]*)\[([0-9,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([\w\-]+)\((.*)$")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")


def type_bytes(text: str) -> float:
    """Bytes of an HLO type (an array or a tuple of arrays): ``f32[64,512]{1,0}`` -> 131072."""
    total = 0.0
    for dtype, dims in _ARRAY.findall(text):
        size = ITEM_BYTES.get(dtype, 1 if dtype.startswith("f8") or dtype.startswith("f4") else None)
        if size is None:
            continue
        if dtype.startswith("f4"):
            size = 0.5
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += size * n
    return total


def parse_module(text: str) -> tuple[str, dict[str, list[tuple[str, str, str, str]]]]:
    """(entry name, computation name -> [(instruction name, type text, opcode, rest of line)])."""
    comps: dict[str, list] = {}
    entry, current = None, None
    for line in text.splitlines():
        head = _HEADER.match(line)
        if head and "=" not in line.split("(")[0]:
            current = head.group(2)
            comps[current] = []
            entry = current if head.group(1) else entry
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            comps[current].append(m.groups())
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    return entry, comps


def _called(rest: str, key: str) -> list[str]:
    m = re.search(key + r"=\{?([^}\s,]+(?:,\s*%[^}\s,]+)*)\}?", rest)
    return [c.strip().lstrip("%") for c in m.group(1).split(",")] if m else []


def _holds_gemm(name: str, comps: dict, seen: set) -> bool:
    if name in seen or name not in comps:
        return False
    seen.add(name)
    for _, _, op, rest in comps[name]:
        if op in ("dot", "convolution"):
            return True
        if op == "fusion" and any(_holds_gemm(c, comps, seen) for c in _called(rest, "calls")):
            return True
    return False


def count_passes(text: str) -> dict:
    """Traffic figures of one optimised HLO module (see the module doc)."""
    entry, comps = parse_module(text)
    todo, top = [entry], []
    while todo:
        name = todo.pop()
        if name in top or name not in comps:
            continue
        top.append(name)
        for _, _, op, rest in comps[name]:
            if op == "while":
                todo += _called(rest, "body") + _called(rest, "condition")
            elif op == "conditional":
                todo += (_called(rest, "branch_computations") + _called(rest, "true_computation")
                         + _called(rest, "false_computation"))
            elif op == "call":
                todo += _called(rest, "to_apply")
    gemms, gemm_bytes, traffic, instructions = 0, 0.0, 0.0, 0
    for comp in top:
        shapes = {name: typ for name, typ, _, _ in comps[comp]}
        for _, typ, op, rest in comps[comp]:
            args = rest.split(")", 1)[0]
            operands = dict.fromkeys(a.strip().lstrip("%") for a in args.split(",") if a.strip().startswith("%"))
            in_bytes = sum(type_bytes(shapes.get(o, "")) for o in operands)
            is_gemm = (op in ("dot", "convolution")
                       or (op == "fusion" and any(_holds_gemm(c, comps, set()) for c in _called(rest, "calls")))
                       or (op == "custom-call" and GEMM_TARGET.search(rest.split("custom_call_target=", 1)[-1][:80])))
            if is_gemm:
                gemms += 1
                gemm_bytes += in_bytes
            elif op not in FREE_OPS:
                instructions += 1
                traffic += in_bytes + type_bytes(typ)
    return {"gemms": gemms, "gemm_operand_mb": gemm_bytes / 1e6, "other_instructions": instructions,
            "traffic_mb": traffic / 1e6}


def _model(model: str, quick: bool):
    """(init, loss, batch) of ``benchmarks/gpu_emulate.py``'s models: the MLP 4096 wide x 4 layers
    at batch 256, or the transformer d_model 1024 x 4 layers, 16 heads, context 256 at batch 16
    (``quick``: 64 wide x 2 at batch 16; d_model 64 x 2, 4 heads, context 16 at batch 4)."""
    import jax.numpy as jnp
    from gpu_emulate_parts import mlp, transformer  # benchmarks/ is on sys.path

    if model == "mlp":
        width, batch = (64, 16) if quick else (4096, 256)  # 16: nvfp4's wgrad rotation takes 16-row blocks
        init, loss = mlp(width, 2 if quick else 4)
        return init, loss, (jnp.zeros((batch, width), jnp.float32), jnp.zeros((batch,), jnp.int32))
    if model == "transformer":
        (d, layers, heads, context), batch = ((64, 2, 4, 16), 4) if quick else ((1024, 4, 16, 256), 16)
        init, loss = transformer(d, layers, heads, context)
        return init, loss, jnp.zeros((batch, context + 1), jnp.int32)
    raise ValueError(f"model {model!r}: allowed 'mlp', 'transformer'")


def recipe_passes(recipes: list[str], quick: bool, on_row=None, model: str = "mlp") -> list[dict]:
    """Compile the training step of ``benchmarks/gpu_emulate.py``'s ``model`` (:func:`_model`)
    natively (bf16) and under each recipe on the default backend; one row per recipe with its
    passes and compile time, each also as a multiple of the native step's (``on_row`` is called
    with each row as it exists)."""
    import jax
    import optax
    from gpu_emulate_parts import bf16_native, plain_step  # benchmarks/ is on sys.path

    from asicsim._src.emulate import make_train_step

    init, loss, data = _model(model, quick)
    params, tx = init(0), optax.adam(1e-4)
    rows, native = [], None
    for recipe in ["native bf16", *recipes]:
        if recipe == "native bf16":
            step, state = plain_step(bf16_native(loss), tx), (params, tx.init(params))
        else:
            init_state, step = make_train_step(loss, recipe, tx)
            state = init_state(params, 1)
        t = time.perf_counter()
        compiled = jax.jit(step).lower(state, data).compile()
        row = {"model": model, "recipe": recipe, "compile_s": time.perf_counter() - t,
               **count_passes(compiled.as_text())}
        native = native or row
        if not native["gemms"]:
            raise ValueError("the native step's optimised HLO holds no GEMM: nothing to count passes against")
        # the native step's GEMM operands for every recipe: a recipe whose MAC order is emulated
        # (loops instead of a dot) has the same GEMMs to feed
        row["passes"] = row["traffic_mb"] / (2 * native["gemm_operand_mb"])
        row["passes_x"] = row["passes"] / native["passes"]
        row["compile_x"] = row["compile_s"] / native["compile_s"]
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def main(argv=None) -> list[dict]:
    import jax
    from gpu_emulate_parts import TRAINING_RECIPES, table

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small models (a 64-wide MLP, a d_model 64 transformer)")
    p.add_argument("--model", choices=("mlp", "transformer"), default="mlp")
    p.add_argument("--recipes", help="comma-separated recipes (default: every training recipe)")
    args = p.parse_args(argv)
    with jax.numpy_dtype_promotion("standard"):
        rows = recipe_passes(args.recipes.split(",") if args.recipes else TRAINING_RECIPES, args.quick,
                             model=args.model)
    print(f"backend {jax.default_backend()}, jax {jax.__version__}\n" + table(rows))
    return rows


if __name__ == "__main__":
    main()
