"""``Core.import_model``: a compiled model back from what ``CompiledModel.export_model()`` wrote."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

from inferplex._compiled_model import CompiledModel
from inferplex._model import Model
from inferplex.api.tensor import Tensor
from inferplex.config.devices import parse_device_string
from inferplex.devices.base import DevicePlugin, DeviceProgram
from inferplex.devices.cache import CacheRecord, unpack_export
from inferplex.devices.registry import DeviceRegistry
from inferplex.engine.device_pool import DevicePool
from inferplex.engine.runner import PoolRunner
from inferplex.errors import CompileError, InferplexError, PluginError

__all__ = ["import_compiled"]


def import_compiled(registry: DeviceRegistry, read_model: Callable[[Any], Model], model_stream: Any,
                    device_name: str,
                    given: tuple[dict[str, Any], Mapping[str, Any] | None]) -> CompiledModel:
    """The compiled model in ``model_stream`` on ``device_name`` (see ``Core.import_model``);
    ``given``: the engine's keys of the caller's config, and the rest for the device."""
    engine, rest = given
    blob = _blob_of(model_stream)
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CompileError(f"import_model takes bytes or a binary stream (io.BytesIO, an open file), "
                           f"not {type(blob).__name__}")
    callbacks = engine.get("CACHE_ENCRYPTION_CALLBACKS")
    if callbacks:  # OpenVINO's [encrypt, decrypt]: export_model wrote encrypt(blob)
        blob = bytes(callbacks[1](bytes(blob)))
    exported = unpack_export(bytes(blob))
    spec = parse_device_string(device_name)
    if spec.virtual is not None:
        raise CompileError(f"import_model takes the single device the model was exported from "
                           f"({exported.device}), not {device_name!r}")
    plugin, device = registry.resolve(spec.names[0])
    if device != exported.device:
        raise CompileError(f"the blob was exported from {exported.device}; it cannot be imported on "
                           f"{device}: import it on {exported.device} or compile the model for {device}")
    config = registry.config_for(device, {**exported.config, **(rest or {})})
    config.pop("CACHE_DIR", None)
    fingerprint = plugin.cache_fingerprint(device, config)
    if fingerprint != exported.fingerprint:
        raise CompileError(f"the blob was exported by another engine or build ({exported.fingerprint}); "
                           f"{device} here is {fingerprint}: compile the model again")
    model = read_model(exported.model)
    scoped = registry.scoped()
    program = _imported_program(plugin, exported.program, device, config)
    assert scoped.ledger is not None  # a scoped view has one
    scoped.ledger.add(CacheRecord(device, plugin, config, program, loaded=True))
    pool = DevicePool(program, profiling=bool(config.get("ENABLE_PROFILING", False)),
                      exit_timeout=engine.get("EXIT_TIMEOUT"))
    return CompiledModel(model, PoolRunner(pool), device, {**config, **engine}, None, scoped.ledger)


def _imported_program(plugin: DevicePlugin, blob: bytes, device: str, settings: Mapping[str, Any]
                      ) -> DeviceProgram:
    """``plugin.import_program``, its failures as CompileError naming the device."""
    try:
        program = plugin.import_program(blob, device, settings)
    except InferplexError:
        raise
    except Exception as error:  # noqa: BLE001 - the plugin's own exception types
        raise CompileError(f"{device} could not import the compiled model: {type(error).__name__}: "
                           f"{error}") from error
    if not isinstance(program, DeviceProgram):
        raise PluginError(f"{type(plugin).__name__}.import_program returned {type(program).__name__}; "
                          "it must return a DeviceProgram")
    return program


def _blob_of(model_stream: Any) -> Any:
    """The bytes of an exported model given as bytes, io.BytesIO, another binary stream or a Tensor."""
    if isinstance(model_stream, (bytes, bytearray, memoryview)):  # export_model's result whole, read or not
        return model_stream
    if isinstance(model_stream, io.BytesIO):
        return model_stream.getvalue()
    if callable(getattr(model_stream, "read", None)):
        return model_stream.read()
    if isinstance(model_stream, Tensor):
        return model_stream.data.tobytes()
    return model_stream
