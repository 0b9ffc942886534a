"""The installed ``openvino`` package, which the CPU device's OpenVINO engine and the IR reader and
writer use.

A program may make ``openvino`` mean inferplex, so that OpenVINO programs run unchanged:
``sys.modules["openvino"] = inferplex``, or an import hook that sends ``openvino.*`` to
``inferplex.*``.  A plain ``import openvino`` inside inferplex would then return inferplex itself
(reading an IR would call itself for ever, the CPU engine would compile on inferplex).
:func:`openvino_package` and :func:`openvino_submodule` return the real package's modules in
either case: beside such an alias they are imported with the alias set aside (``openvino``
entries out of ``sys.modules``, import hooks that answer for ``openvino`` with another package
off ``sys.meta_path``), kept here, and the alias is put back as it was.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = ["openvino_package", "openvino_running", "openvino_submodule"]

_PACKAGE = "openvino"
_lock = threading.RLock()
_modules: dict[str, ModuleType] = {}
"""The installed package's modules by full name, once imported beside an alias."""


def openvino_package() -> ModuleType:
    """The ``openvino`` package (ImportError where it is not installed)."""
    return openvino_submodule("")


def openvino_submodule(name: str) -> Any:
    """``openvino.<name>`` (``"op.util"``, ``"_offline_transformations"``); ``""`` for the package."""
    full = f"{_PACKAGE}.{name}" if name else _PACKAGE
    if _is_real(importlib.import_module(_PACKAGE)):  # no alias: the import system's own modules
        return importlib.import_module(full)
    with _lock:
        if full not in _modules:
            _import_beside_alias(full)
        return _modules[full]


def _is_real(module: ModuleType) -> bool:
    """Whether ``module``, which ``import openvino`` gave, is the openvino package and not an alias."""
    return getattr(module, "__name__", None) == _PACKAGE


def _ours(name: str) -> bool:
    return name == _PACKAGE or name.startswith(_PACKAGE + ".")


@contextmanager
def openvino_running() -> Iterator[None]:
    """Around calls into OpenVINO whose own code imports ``openvino`` by name as it runs (its
    bindings check that a model is an ``openvino.Model`` so): ``openvino`` is the installed
    package within, beside an alias too."""
    if _is_real(importlib.import_module(_PACKAGE)):
        yield
        return
    with _lock, _alias_set_aside():
        yield


def _import_beside_alias(full: str) -> None:
    """Import ``full`` from the installed package with the alias set aside, then put the alias back.

    Modules of the package imported before the alias came stay the ones used (not imported twice)."""
    installed = importlib.machinery.PathFinder.find_spec(_PACKAGE)
    folders = tuple(os.path.join(folder, "") for folder in installed.submodule_search_locations or ()) \
        if installed is not None else ()
    for name, module in list(sys.modules.items()):
        if _ours(name) and str(getattr(module, "__file__", None) or "").startswith(folders or ("\0",)):
            _modules.setdefault(name, module)
    with _alias_set_aside():
        module = importlib.import_module(full)
        if not _is_real(importlib.import_module(_PACKAGE)):
            raise ImportError(f"the openvino package does not import beside the alias that makes "
                              f"'openvino' {sys.modules.get(_PACKAGE)!r}")
    _modules[full] = module


@contextmanager
def _alias_set_aside() -> Iterator[None]:
    """Within: ``openvino`` entries of ``sys.modules`` are the installed package's, and import hooks
    that redirect ``openvino`` are off; after: the alias as it was, the package's modules kept."""
    aliased = {name: sys.modules.pop(name) for name in [n for n in sys.modules if _ours(n)]}
    hooks = list(sys.meta_path)
    sys.modules.update(_modules)
    sys.meta_path[:] = [hook for hook in hooks if not _redirects(hook)]
    try:
        yield
    finally:
        _modules.update({name: sys.modules.pop(name) for name in [n for n in sys.modules if _ours(n)]})
        sys.modules.update(aliased)
        sys.meta_path[:] = hooks


def _redirects(hook: Any) -> bool:
    """Whether the import hook ``hook`` answers for ``openvino`` with something else than the
    standard path finder finds (an alias)."""
    if hook in (importlib.machinery.BuiltinImporter, importlib.machinery.FrozenImporter,
                importlib.machinery.PathFinder):
        return False
    find_spec = getattr(hook, "find_spec", None)
    if find_spec is None:
        return False
    try:
        spec = find_spec(_PACKAGE, None)
    except Exception:  # noqa: BLE001 - a hook that fails here is no alias of ours to set aside
        return False
    if spec is None:
        return False
    installed = importlib.machinery.PathFinder.find_spec(_PACKAGE)
    return installed is None or spec.origin != installed.origin
