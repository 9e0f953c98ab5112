"""Flax NNX modules passed to an emulated function keep their in-place state.

An NNX module mutates itself when called (BatchNorm's running statistics, Dropout's RNG counts).
``emulate`` traces the function on array leaves, so the module the function sees is a copy and
its updates would be lost. As ``nnx.jit`` does, each NNX graph node among the positional
arguments is split into (graphdef, state), the state is traced, the module is merged inside the
traced function, its state after the call is returned beside the result and written back into
the caller's module with ``nnx.update``. Flax is imported only where the caller has loaded it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass
class GraphArgs:
    """The NNX graph nodes among a call's positional arguments (index -> (module, graphdef))."""

    nodes: dict

    def merge(self, args: tuple) -> tuple:
        """``args`` (states in place of the modules) with the modules rebuilt from them."""
        nnx = sys.modules["flax.nnx"]
        return tuple(nnx.merge(self.nodes[i][1], a) if i in self.nodes else a for i, a in enumerate(args))

    def states(self, args: tuple) -> list:
        """The rebuilt modules' state after the call (what the function changed in place)."""
        nnx = sys.modules["flax.nnx"]
        return [nnx.split(args[i])[1] for i in sorted(self.nodes)]

    def update(self, states: list) -> None:
        """Write the states back into the caller's modules."""
        nnx = sys.modules["flax.nnx"]
        for i, state in zip(sorted(self.nodes), states, strict=True):
            nnx.update(self.nodes[i][0], state)


def lift(args: tuple) -> tuple[tuple, GraphArgs | None]:
    """(``args`` with each NNX graph node replaced by its state, its GraphArgs; None: no node)."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is None:
        return args, None
    nodes = {i: a for i, a in enumerate(args) if nnx.graph.is_graph_node(a)}
    if not nodes:
        return args, None
    split = {i: nnx.split(a) for i, a in nodes.items()}
    lifted = tuple(split[i][1] if i in split else a for i, a in enumerate(args))
    return lifted, GraphArgs({i: (nodes[i], split[i][0]) for i in nodes})
