"""The engine's keys set with ``set_property``: what later compiles start from.

In OpenVINO a key that a device's compile takes can also be set on the device
beforehand (``core.set_property("GPU", {...})``): later compiles there start from
it, and ``get_property`` reads it back.  The engine's keys
(:data:`~inferplex.config.schema.ENGINE_PROPERTIES`: ``OUTPUT_PRECISION``,
``ENABLE_TRACE``, ``EXIT_TIMEOUT``, ``CACHE_ENCRYPTION_CALLBACKS``) are read by the
request engine for every device rather than by a plugin, so the device registry,
which keeps the plugins' keys, does not hold them: :class:`EngineSettings` does,
per scope.

Scopes, the later winning: the Core (``""``: ``set_property({...})`` with no
device), then a device family (``"GPU"``) or a virtual device (``"MULTI"``), then
one device (``"GPU.1"``); a compile's own config wins over all of them.  A virtual
device's compile reads the Core's scope and its own: these keys shape the whole
compiled model (its output types, its trace, its exit wait), which a member device
of HETERO, MULTI or AUTO does not own, so keys set on a member apply to compiles on
that device alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from inferplex.config import output_precision
from inferplex.config.schema import CORE_PROPERTIES, ENGINE_PROPERTIES, canonical_key, normalize_config
from inferplex.errors import PropertyError

__all__ = ["LISTED", "EngineSettings", "split_compile_config", "split_engine_keys"]

LISTED = tuple(key for key in ENGINE_PROPERTIES if key != "CACHE_ENCRYPTION_CALLBACKS")
"""The engine's keys a device's SUPPORTED_PROPERTIES lists: each reads back, set or not.  The
encryption callbacks are write-only in OpenVINO (``PropertyMutability::WO``): they read back
only where set."""

_UNSET = {output_precision.KEY: "MODEL", "ENABLE_TRACE": False}
"""What ``get_property`` reads for a key no scope set (``EXIT_TIMEOUT``'s default comes from the
engine's lifecycle module; ``CACHE_ENCRYPTION_CALLBACKS`` has none)."""


class EngineSettings:
    """The engine's keys set with ``set_property``, by scope (see the module docstring)."""

    def __init__(self) -> None:
        self._scopes: dict[str, dict[str, Any]] = {}

    def set(self, scope: str, parsed: Mapping[str, Any]) -> None:
        """Keep ``parsed`` (checked, canonical keys and values) for ``scope``."""
        if parsed:
            self._scopes.setdefault(scope, {}).update(parsed)

    def merged(self, scopes: Iterable[str]) -> dict[str, Any]:
        """The keys set in ``scopes``, a later scope's value winning."""
        result: dict[str, Any] = {}
        for scope in scopes:
            result.update(self._scopes.get(scope, {}))
        return result

    def read(self, key: str, scopes: Iterable[str], target: str) -> Any:
        """``key``'s value for a compile in ``scopes`` (its default where none set it)."""
        scopes = tuple(scopes)
        merged = self.merged(scopes)
        if key in merged:
            return merged[key]
        if key in _UNSET:
            return _UNSET[key]
        if key == "EXIT_TIMEOUT":
            from inferplex.engine.lifecycle import DEFAULT_EXIT_TIMEOUT

            return DEFAULT_EXIT_TIMEOUT
        raise PropertyError(f"{key} is not set for {target}; set it with "
                            f"core.set_property({target!r}, {{{key!r}: ...}}) or in the compile config")


def split_compile_config(config: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The engine's own keys of a compile config (checked), and the rest for the devices; the
    Core's options (:data:`~inferplex.config.schema.CORE_PROPERTIES`) are checked and left out."""
    if not config or not isinstance(config, Mapping):
        return {}, config  # type: ignore[return-value]
    engine = {k: v for k, v in config.items() if canonical_key(k) in ENGINE_PROPERTIES}
    normalize_config({k: v for k, v in config.items() if canonical_key(k) in CORE_PROPERTIES},
                     CORE_PROPERTIES, target="the Core")
    rest = {k: v for k, v in config.items() if canonical_key(k) not in (*ENGINE_PROPERTIES, *CORE_PROPERTIES)}
    return normalize_config(engine, ENGINE_PROPERTIES, target="the engine"), rest


def split_engine_keys(properties: Mapping[str, Any], accepted: tuple[str, ...], target: str,
                      parsers: Mapping[str, Callable[[Any], Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``set_property(target, properties)``'s engine keys (checked) and the rest (as given, for the
    device or virtual device, whose own checks follow).  ``accepted`` and ``parsers``: the keys
    ``target`` takes and its own keys' parsers.  The Core's options are checked and left out, as in
    a compile's config.  Every key is checked here first, so that one error
    names every problem (listing the engine's keys among those accepted) and nothing is kept when
    one is wrong."""
    parsed = normalize_config(properties, (*accepted, *ENGINE_PROPERTIES, *CORE_PROPERTIES), target, parsers)
    engine = {k: v for k, v in parsed.items() if k in ENGINE_PROPERTIES}
    return engine, {k: v for k, v in properties.items()
                    if canonical_key(k) not in (*ENGINE_PROPERTIES, *CORE_PROPERTIES)}
