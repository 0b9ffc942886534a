"""CompiledModel (OpenVINO's runtime API; its requests are in :mod:`._infer_request`).

A compiled model frees everything it holds (threads, device programs, worker
processes) on ``release()``, at the end of a ``with`` block, or when it is
garbage-collected.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from inferplex._binding import InferResults
from inferplex._infer_request import InferRequest
from inferplex._model import Model
from inferplex._ports import Port, find_port, port_listing
from inferplex.api.keywords import keyword_aliases
from inferplex.devices.cache import CompileLedger
from inferplex.engine import lifecycle
from inferplex.engine.completions import Completions
from inferplex.engine.request import OutputSpec
from inferplex.engine.runner import Runner
from inferplex.engine.trace import Timeline
from inferplex.errors import ModelError, PropertyError
from inferplex.state.request_state import VariableState
from inferplex.state.stateless import state_plan, stateless_copy

__all__ = ["CompiledModel", "ExportedModelBytes"]

_log = logging.getLogger("inferplex")

_CHANGEABLE = ("MULTI_DEVICE_PRIORITIES", "SCHEDULE_POLICY")
"""The keys a compiled model's SUPPORTED_PROPERTIES marks RW: those MULTI and AUTO change after compiling."""


class ExportedModelBytes(bytes):
    """What ``CompiledModel.export_model()`` returns: the exported bytes, which programs written for
    OpenVINO 2024 write to a file as they are, that also read as the ``io.BytesIO`` OpenVINO 2026
    returns (``getvalue``, ``getbuffer``, ``read``, ``seek``, ``tell``)."""

    _position = 0

    def getvalue(self) -> bytes:
        return bytes(self)

    def getbuffer(self) -> memoryview:
        return memoryview(self)

    def read(self, size: int | None = -1) -> bytes:
        """The next ``size`` bytes (all that are left where ``size`` is negative or None)."""
        end = len(self) if size is None or size < 0 else min(len(self), self._position + size)
        start, self._position = self._position, max(self._position, end)
        return bytes(self[start:end])

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move to ``offset`` from ``whence``; a position before the start, or a whence other than 0, 1
        or 2, raises :class:`~inferplex.errors.ModelError` (a ValueError, as ``io.BytesIO`` raises)."""
        base = {0: 0, 1: self._position, 2: len(self)}.get(whence)
        if base is None or base + offset < 0:
            raise ModelError(f"seek to {offset} from whence {whence} is outside the exported model's bytes "
                             "(whence: 0 from the start, 1 from the position, 2 from the end)")
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


def _release(runner: Runner, completions: Completions) -> None:
    try:
        runner.close()
    finally:
        completions.close()


class CompiledModel:
    """A model compiled for a device (single or virtual); create requests from it."""

    def __init__(self, model: Model, runner: Runner, device_name: str, config: Mapping[str, Any],
                 timeline: Timeline | None = None, ledger: CompileLedger | None = None) -> None:
        self._model = model
        self._ledger = ledger  # the device programs compiled for it: LOADED_FROM_CACHE, export_model
        self._inputs = [port.snapshot() for port in model.inputs]  # the ports compiled with
        self._outputs = [port.snapshot() for port in model.outputs]
        self._runner = runner
        self._device_name = device_name
        self._batch: tuple[str, int, int] | None = None  # see as_batch
        self._config = dict(config)
        self._timeline = timeline
        self._expected = _output_spec(self._outputs)
        self._completions = Completions(device_name)
        self._infer_request: InferRequest | None = None  # OpenVINO's name for it (see _own_request)
        self._state_plan = state_plan(model.ir)  # its variables: fed and kept by each request
        self._lock = threading.Lock()
        # Holds neither self nor anything that refers to it: the model can be collected.
        self._finalizer = weakref.finalize(self, _release, runner, self._completions)
        self._finalizer.atexit = False  # at exit the engine lets requests end; nothing to free
        lifecycle.run_first_at_exit()

    @property
    def inputs(self) -> list[Port]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[Port]:
        return list(self._outputs)

    @keyword_aliases(index="key", tensor_name="key")
    def input(self, key: int | str | Port = 0) -> Port:
        return find_port(self.inputs, key, "input")

    @keyword_aliases(index="key", tensor_name="key")
    def output(self, key: int | str | Port = 0) -> Port:
        return find_port(self.outputs, key, "output")

    def create_infer_request(self) -> InferRequest:
        """A new request, with its own input and output tensors."""
        return InferRequest(self)

    def infer_new_request(self, inputs: Any = None) -> InferResults:
        """Run ``inputs`` on a new request and return its results (OpenVINO's ``infer_new_request``)."""
        return self.create_infer_request().infer(inputs)

    def __call__(self, inputs: Any = None, share_inputs: bool = True, share_outputs: bool = False,
                 *, decode_strings: bool = True) -> InferResults:
        """Run one inference synchronously on a request the model keeps (``compiled_model(inputs)``).

        As in OpenVINO, inputs are shared by default here (``share_inputs=True``:
        arrays of the input's dtype are read where they are) and results are
        copies unless ``share_outputs=True``.  See :meth:`InferRequest.infer`.
        """
        return self._own_request().infer(inputs, share_inputs, share_outputs, decode_strings=decode_strings)

    def _own_request(self) -> InferRequest:
        """The request ``compiled_model(inputs)`` runs on, made at its first use."""
        with self._lock:
            if self._infer_request is None:
                self._infer_request = self.create_infer_request()
            return self._infer_request

    def query_state(self) -> list[VariableState]:
        """The variables of the request ``compiled_model(inputs)`` runs on (``InferRequest.query_state``)."""
        return self._own_request().query_state()

    def reset_state(self) -> None:
        """Unset the variables of the request ``compiled_model(inputs)`` runs on."""
        self._own_request().reset_state()

    def get_runtime_model(self) -> Model:
        """A copy of the model that runs, each op's ``rt_info`` saying where it runs.

        ``affinity`` names the device that runs the op (for HETERO, its
        subgraph's device; for MULTI, every device that may run it, comma-separated);
        ``execOrder`` is its position in execution order, ``layerType`` its
        op type and ``originalLayersNames`` its name in the model.  As in
        OpenVINO's runtime model: ``runtimePrecision`` (the inference precision
        for ops with floating-point outputs, else the output's own type),
        ``outputPrecisions`` and ``outputLayouts`` per output (comma-separated),
        ``primitiveType`` (device and precision) and ``execTimeMcs``
        (``not_executed``: per-op times come from ``get_profiling_info``).
        Values read as strings and as OpenVINO's ``OVAny`` (``astype(str)``).
        """
        runtime = self._model.clone()
        where = self._placement()
        every = ",".join(self._runner.execution_devices)
        from inferplex.api.reshape import value_types

        precision = self._inference_precision()
        typed = value_types(runtime.ir)
        for order, op in enumerate(o for o in runtime.get_ordered_ops() if hasattr(o, "node")):
            info = op.get_rt_info()
            name = op.get_friendly_name()
            info["affinity"] = where.get(name, every)
            info["execOrder"] = str(order)
            info["layerType"] = op.get_type_name()
            info["originalLayersNames"] = name
            outputs = [typed.get(value.name or "", (0, None)) for value in op.node.outputs]
            types = [_type_name(elem_type) for elem_type, _ in outputs]
            floating = any(t in _FLOATING for t in types)
            info["runtimePrecision"] = precision if floating else (types[0] if types else "undef")
            info["outputPrecisions"] = ",".join(precision if t in _FLOATING else t for t in types)
            info["outputLayouts"] = ",".join(_layout_name(rank) for _, rank in outputs)
            info["primitiveType"] = f"{info['affinity']}_{info['runtimePrecision']}"
            info["execTimeMcs"] = "not_executed"
        return runtime

    def _inference_precision(self) -> str:
        """The compiled model's INFERENCE_PRECISION_HINT as OpenVINO's short name (f32 where unknown)."""
        try:
            value = self._runner.get_property("INFERENCE_PRECISION_HINT")
        except Exception:  # noqa: BLE001 - a device without the hint runs the model's own types
            return "f32"
        text = str(getattr(value, "get_type_name", lambda: value)()).lower()
        return {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}.get(text, text or "f32")

    def _placement(self) -> dict[str, str]:
        """``{op name: device}`` where a HETERO plan places ops; empty for other devices."""
        try:
            plan = self._runner.get_property("HETERO_SUBGRAPHS")
        except KeyError:
            return {}
        return {node: sub.device for sub in getattr(plan, "subgraphs", ()) for node in sub.nodes}

    def export_model(self, model_stream: Any = None) -> ExportedModelBytes | None:
        """The compiled model as bytes for ``Core.import_model`` (OpenVINO's ``export_model``),
        readable as a stream too (see :class:`ExportedModelBytes`).

        With ``model_stream`` (a binary stream such as ``io.BytesIO``) the bytes
        are written there and None is returned.  The blob holds the model and the
        device's compiled program; it imports on the same device with the same
        engine version.  Models compiled on one device export; virtual devices
        (HETERO, MULTI, AUTO) do not, nor devices whose programs are not cacheable.
        """
        from inferplex.devices.cache import ExportedModel, export_anew, model_bytes, pack_export
        from inferplex.errors import CompileError

        records = self._ledger.snapshot() if self._ledger is not None else []
        virtual = ":" in self._device_name or self._device_name in ("HETERO", "MULTI", "AUTO")
        if len(records) != 1 or virtual:
            raise CompileError(f"export_model exports a model compiled on one device; {self._device_name} "
                               "is a virtual device: compile on one of its devices to export")
        record = records[0]
        blob = record.plugin.export_program(record.program)
        fingerprint = record.plugin.cache_fingerprint(record.device, record.config)
        if blob is None and record.loaded and fingerprint is not None:  # its form stayed in the cache
            blob = export_anew(record.plugin, stateless_copy(self._model.ir), record.device, record.config)
        if blob is None or fingerprint is None:
            raise CompileError(f"{record.device} cannot export this compiled model (its programs are not "
                               "cacheable); compile the model again where it is needed")
        data = pack_export(ExportedModel(record.device, fingerprint, record.config,
                                         model_bytes(self._model.ir), bytes(blob)))
        callbacks = self._config.get("CACHE_ENCRYPTION_CALLBACKS")
        if callbacks:  # OpenVINO's [encrypt, decrypt]: the blob leaves encrypted
            data = bytes(callbacks[0](data))
        if model_stream is None:
            return ExportedModelBytes(data)
        model_stream.write(data)
        return None

    def release_memory(self) -> None:
        """Free memory the devices keep between runs where they can; the model stays usable.

        Runners that keep such memory expose ``release_memory``; where none does
        (the devices allocate per run), there is nothing to free and this returns.
        """
        release = getattr(self._runner, "release_memory", None)
        if callable(release):
            release()

    @keyword_aliases(property="key", name="key")
    def get_property(self, key: str) -> Any:
        """Read a property: hints and settings, OPTIMAL_NUMBER_OF_INFER_REQUESTS, EXECUTION_DEVICES, ...,
        typed as OpenVINO returns it (:func:`inferplex.properties._typed.typed_value`), in the form
        the device's compiled models give it (``DeviceProgram.presented_property``)."""
        from inferplex.config.schema import canonical_key
        from inferplex.properties._typed import typed_value

        name = canonical_key(key)
        typed = typed_value(key, self._property(name, key), writable=_CHANGEABLE)
        return self._runner.presented_property(key, typed)

    def as_batch(self, device_name: str, batch: int, timeout: int) -> None:
        """Report this model, compiled on one device, as OpenVINO's automatic batching device
        ``device_name`` (``BATCH:CPU(4)``) reports it: OPTIMAL_NUMBER_OF_INFER_REQUESTS is ``batch``
        times the device's, and AUTO_BATCH_TIMEOUT (milliseconds) reads back."""
        self._batch = (self._device_name, batch, timeout)
        self._device_name = device_name

    def _property(self, name: str, key: str) -> Any:
        if self._batch is not None and name == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self._batch[1] * self._runner.optimal_number_of_infer_requests
        if self._batch is not None and name == "AUTO_BATCH_TIMEOUT":
            return self._batch[2]
        if name == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self._runner.optimal_number_of_infer_requests
        if name == "EXECUTION_DEVICES":
            return list(self._runner.execution_devices)
        if name in ("NETWORK_NAME", "MODEL_NAME"):
            return self._model.friendly_name
        if name == "SUPPORTED_PROPERTIES":
            return self._supported_properties()
        if name == "LOADED_FROM_CACHE":
            return self._ledger is not None and self._ledger.loaded_from_cache()
        if name == "OUTPUT_PRECISION":  # the engine applied it to the model (see config.output_precision)
            return self._config.get(name, "MODEL")
        if name == "TRACE":
            if self._timeline is None:
                raise PropertyError("TRACE is recorded only when the model is compiled with "
                                    "{'ENABLE_TRACE': True}")
            return self._timeline.to_chrome()
        try:
            return self._runner.get_property(name)
        except KeyError:
            pass
        if name in self._config:
            return self._config[name]
        raise PropertyError(f"compiled model on {self._device_name} has no property {key!r}; "
                            f"it has: {', '.join(self._supported_properties())}")

    def _supported_properties(self) -> list[str]:
        """Every key get_property answers: the model's, the runner's (its devices'), the settings."""
        names = ["OPTIMAL_NUMBER_OF_INFER_REQUESTS", "EXECUTION_DEVICES", "NETWORK_NAME",
                 "SUPPORTED_PROPERTIES", "LOADED_FROM_CACHE", "OUTPUT_PRECISION",
                 *(["TRACE"] if self._timeline is not None else []),
                 *(["AUTO_BATCH_TIMEOUT"] if self._batch is not None else []),
                 *self._runner.property_names(), *self._config]
        return list(dict.fromkeys(names))

    @keyword_aliases(property="properties")
    def set_property(self, properties: Mapping[str, Any] | tuple[str, Any]) -> None:
        """Change properties after compilation (e.g. MULTI_DEVICE_PRIORITIES on MULTI)."""
        from inferplex.config.schema import normalize_config

        parsed = normalize_config(properties, target=self._device_name)  # a dict or one (key, value) pair
        self._runner.set_property(parsed)
        self._config.update(parsed)

    def release(self) -> None:
        """Stop the threads and release the devices' programs (also done when collected).

        Requests already queued still run to the end; later ones fail with an
        InferenceError.  Callable from any thread, completion callbacks included.
        """
        self._finalizer()

    def __enter__(self) -> CompiledModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<CompiledModel:{port_listing(self._inputs, self._outputs)}>"


def _output_spec(ports: list[Port]) -> OutputSpec:
    """What each request's outputs must be: every output by name; a tensor output an array, of
    its numpy dtype where the model gives a static element type numpy knows natively (extension
    types such as bfloat16 and dynamic types are not checked)."""
    spec: list[tuple[str, bool, np.dtype[Any] | None]] = []
    for port in ports:
        if not port.is_tensor:  # a sequence or an optional: any value
            spec.append((port.any_name, False, None))
            continue
        try:
            dtype: np.dtype[Any] | None = port.element_type.to_dtype()
        except Exception:  # noqa: BLE001 - a dynamic or unmapped type: presence is checked only
            dtype = None
        if dtype is not None and not dtype.isbuiltin and dtype.kind not in "OSU":
            dtype = None
        spec.append((port.any_name, True, dtype))
    return tuple(spec)


_FLOATING = ("f32", "f16", "bf16", "f64")


def _type_name(elem_type: int) -> str:
    """OpenVINO's short name of an ONNX element type (``undef`` where unknown)."""
    import onnx_ir as ir

    from inferplex.api.types import Type

    try:
        return Type(ir.DataType(elem_type)).get_type_name() if elem_type else "undef"
    except Exception:  # noqa: BLE001 - a type OpenVINO has no name for
        return "undef"


def _layout_name(rank: int | None) -> str:
    """OpenVINO's plain layout of an output (``abcd`` for rank 4), ``undef`` where the rank is unknown."""
    return "undef" if rank is None else "abcdefghijklmnopqrstuvwxyz"[:rank] or "a"
