"""Packages whose public names are imported on first use: ``import asicsim`` (and so ``asicsim
--help``, ``--version`` and the catalog listings) loads neither JAX nor pandas until a name that
needs them is used.

A package lists its names by the module that defines them and calls :func:`lazy_package`::

    lazy_package(__name__, {".quantize": ["quantize"], ".catalog": ["get_format"], ".emulate": None})

(``None`` exports the module itself.)
``from asicsim.numerics import quantize``, ``asicsim.numerics.quantize(...)``, ``dir()`` and
``help()`` then work as with eager imports. Where an exported name is also a submodule's name
(``asicsim.numerics.quantize``: the function and its module), the export wins, as it did when the
package ran ``from .quantize import quantize``: the import system binds a submodule on its package
when it is first imported, which would otherwise hide the function behind its module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


def _targets(package: str, exports: dict[str, list[str] | None]) -> dict[str, tuple[str, str | None]]:
    """name -> (absolute module, attribute; None: the module itself)."""
    out: dict[str, tuple[str, str | None]] = {}
    for module, names in exports.items():
        absolute = importlib.util.resolve_name(module, package)
        if names is None:
            out[absolute.rpartition(".")[2]] = (absolute, None)
        for attr in names or ():
            out[attr] = (absolute, attr)
    return out


class LazyPackage(types.ModuleType):
    """A package module whose exports (``_lazy_exports``) load when first used."""

    def __getattr__(self, name: str):  # only called for a name not (yet) set
        exports = self.__dict__.get("_lazy_exports", {})
        if name not in exports:
            if (not name.startswith("_") and "__path__" in self.__dict__  # a package, not a facade
                    and importlib.util.find_spec(f"{self.__name__}.{name}") is not None):
                return importlib.import_module(f"{self.__name__}.{name}")  # a submodule, as before
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        module, attr = exports[name]
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        self.__dict__[name] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        exports = self.__dict__.get("_lazy_exports", {})
        if isinstance(value, types.ModuleType) and name in exports:
            module, attr = exports[name]
            if attr is not None and value.__name__ == module:  # a submodule shadowing its own export
                value = getattr(value, attr)
        super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_lazy_exports", {})))


def lazy_package(name: str, exports: dict[str, list[str] | None], cls: type[LazyPackage] = LazyPackage) -> None:
    """Make the module ``name`` (a package's ``__name__``) load ``exports`` (module -> names) on
    first use; ``cls``: a subclass of :class:`LazyPackage` (e.g. one that makes the package callable)."""
    module = sys.modules[name]
    module.__dict__["_lazy_exports"] = _targets(name, exports)
    module.__class__ = cls


def public_facade(name: str, private: str) -> None:
    """Make the module ``name`` the public face of the private package ``private``
    (``asicsim._src.<package>``): it exports exactly the names the private package exports (its
    lazy exports and its ``__all__``), each loaded on first use, and has no submodules, so the
    implementation's modules are not part of the supported surface."""
    impl = importlib.import_module(private)
    exports = dict(impl.__dict__.get("_lazy_exports", {}))
    for attr in impl.__dict__.get("__all__", ()):
        exports.setdefault(attr, (private, attr))
    module = sys.modules[name]
    module.__dict__["_lazy_exports"] = exports
    module.__dict__["__all__"] = sorted(exports)
    module.__class__ = LazyPackage
