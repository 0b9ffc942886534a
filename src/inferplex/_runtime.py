"""CompiledModel and InferRequest (OpenVINO's runtime API; AsyncInferQueue is in :mod:`._async_queue`).

Every started request ends exactly once, through its
:class:`~inferplex.engine.request.Request` future.  When an asynchronous request
ends, its completion runs on the compiled model's completion executor (never
on a device's thread): first the user's callback (whose exceptions are logged,
never allowed to stall anything), then the request is marked ended, so
``wait()`` returns after the callback has run.  The results are readable from
the moment the request has ended on its device, inside its own callback too.
A failed request raises its error from ``wait()``, ``infer()`` and ``results``.

A compiled model frees everything it holds (threads, device programs, worker
processes) on ``release()``, at the end of a ``with`` block, or when it is
garbage-collected.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from inferplex._binding import InferResults, keyed_inputs, note_caller_streams
from inferplex._model import Model
from inferplex._ports import Port, find_port
from inferplex._request_tensors import RequestTensors, TensorAccess
from inferplex.devices.base import ProfilingInfo
from inferplex.devices.cache import CompileLedger
from inferplex.engine import lifecycle
from inferplex.engine.completions import Completions, blocking, on_completion_thread
from inferplex.engine.device_pool import as_inference_error
from inferplex.engine.latch import Latch
from inferplex.engine.request import OutputSpec, Request, RunResult
from inferplex.engine.runner import Runner
from inferplex.engine.trace import Timeline
from inferplex.errors import InferenceError, InputError, PropertyError, RequestBusyError

__all__ = ["CompiledModel", "InferRequest", "in_completion_callback"]

_log = logging.getLogger("inferplex")

_CHANGEABLE = ("MULTI_DEVICE_PRIORITIES", "SCHEDULE_POLICY")
"""The keys a compiled model's SUPPORTED_PROPERTIES marks RW: those MULTI and AUTO change after compiling."""


def in_completion_callback() -> bool:
    """True on a thread that is running a request's completion callback."""
    return on_completion_thread()


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
        self._config = dict(config)
        self._timeline = timeline
        self._expected = _output_spec(self._outputs)
        self._completions = Completions(device_name)
        self._default_request: InferRequest | None = None
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

    def input(self, key: int | str | Port = 0) -> Port:
        return find_port(self.inputs, key, "input")

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
        with self._lock:
            if self._default_request is None:
                self._default_request = self.create_infer_request()
        return self._default_request.infer(inputs, share_inputs, share_outputs,
                                           decode_strings=decode_strings)

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

    def export_model(self, model_stream: Any = None) -> bytes | None:
        """The compiled model as bytes for ``Core.import_model`` (OpenVINO's ``export_model``).

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
            blob = export_anew(record.plugin, self._model.ir, record.device, record.config)
        if blob is None or fingerprint is None:
            raise CompileError(f"{record.device} cannot export this compiled model (its programs are not "
                               "cacheable); compile the model again where it is needed")
        data = pack_export(ExportedModel(record.device, fingerprint, record.config,
                                         model_bytes(self._model.ir), bytes(blob)))
        if model_stream is None:
            return data
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

    def get_property(self, key: str) -> Any:
        """Read a property: hints and settings, OPTIMAL_NUMBER_OF_INFER_REQUESTS, EXECUTION_DEVICES, ...,
        typed as OpenVINO returns it (:func:`inferplex.properties._typed.typed_value`)."""
        from inferplex.config.schema import canonical_key
        from inferplex.properties._typed import typed_value

        name = canonical_key(key)
        return typed_value(name, self._property(name, key), writable=_CHANGEABLE)

    def _property(self, name: str, key: str) -> Any:
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
                 *self._runner.property_names(), *self._config]
        return list(dict.fromkeys(names))

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
        return f"<CompiledModel {self._model.friendly_name!r} on {self._device_name}>"


class InferRequest(TensorAccess):
    """One inference request: sync ``infer`` or ``start_async`` + ``wait``.

    It holds one tensor per input and output (see
    :mod:`inferplex._request_tensors`): what ``infer`` is given is placed there,
    what the caller writes into ``get_input_tensor(i).data`` is what a run
    without inputs reads, and results land in the output tensors.
    """

    def __init__(self, compiled: CompiledModel) -> None:
        self._compiled = compiled
        self._tensors = RequestTensors(compiled._inputs, compiled._outputs, compiled._runner.pin_host_memory)
        self._request: Request | None = None
        self._callback: Callable[[Any], None] | None = None
        self._callback_userdata: Any = None
        self._completion_hook: Callable[[InferRequest], None] | None = None
        self._ended = Latch(is_set=True)
        self._completing: int | None = None  # the thread running this request's completion
        self._lock = threading.Lock()
        self._latency_ms = 0.0
        self.userdata: Any = None

    def get_compiled_model(self) -> CompiledModel:
        """The compiled model this request belongs to."""
        return self._compiled

    def _check_idle(self) -> None:
        if not self._ended.is_set() and self._completing != threading.get_ident():
            raise RequestBusyError("this InferRequest is still running; call wait() before "
                                   "changing its tensors or starting it again")

    def _bind(self, inputs: Any, share_inputs: bool = False) -> dict[str, Any]:
        """Place ``inputs`` in the request's tensors; ``{input name: array}`` to run."""
        self._check_idle()
        tensors = self._tensors
        return tensors.bind(keyed_inputs(tensors.inputs, inputs, tensors.input_index), share_inputs)

    # --- running ---------------------------------------------------------------------

    def _begin(self, bound: Mapping[str, Any]) -> Request:
        with self._lock:
            if not self._ended.is_set():
                raise RequestBusyError("this InferRequest is still running; call wait() before "
                                       "starting it again, or use more requests (AsyncInferQueue)")
            self._ended.clear()
            request = Request(bound, self._compiled._timeline, self._compiled._expected)
            self._request = request
            return request

    def infer(self, inputs: Any = None, share_inputs: bool = False, share_outputs: bool = False,
              *, decode_strings: bool = True) -> InferResults:
        """Run synchronously and return the results (OpenVINO's ``InferRequest.infer``).

        ``share_inputs=False`` (the default) copies the inputs into the
        request's tensors, converting dtypes; with True, numpy arrays of the
        input's dtype that are C-contiguous and writable are read in place and
        must not change until the run ends.  ``share_outputs=False`` returns
        copies of the results; True returns views of the output tensors, which
        the next run overwrites.  ``decode_strings``: string outputs as ``str``
        (True) or ``bytes`` (False).
        """
        request = self._begin(self._bind(inputs, share_inputs))
        try:
            result = self._compiled._runner.run(request)
            self._tensors.ran(result.outputs)
        except Exception as error:  # noqa: BLE001 - the request ends with it; results raises it
            request.fail(as_inference_error(error, self._compiled._device_name))
        except BaseException as error:  # KeyboardInterrupt: end the request, let it through
            request.fail(InferenceError(f"the run was interrupted: {type(error).__name__}"))
            raise
        finally:
            self._latency_ms = (time.perf_counter() - request.started) * 1e3
            self._ended.set()
        return self._results(share_outputs, decode_strings)

    def start_async(self, inputs: Any = None, userdata: Any = None, share_inputs: bool = False) -> None:
        """Start without waiting; the callback runs when the request ends.

        ``share_inputs`` as in :meth:`infer`: with False (the default) the
        inputs are copied and the caller may reuse its arrays at once; with
        True arrays read in place must stay unchanged until the request ends.
        """
        self._start_bound(self._bind(inputs, share_inputs), userdata)

    def _start_bound(self, bound: dict[str, Any], userdata: Any) -> None:
        note_caller_streams(bound)  # the run starts on another thread: see note_caller_streams
        request = self._begin(bound)
        self.userdata = userdata
        lifecycle.started()
        completions = self._compiled._completions

        def ended(_: object) -> None:
            # Nothing of the user's to run (no callback, no queue hook): end it here, on the
            # device thread, so that wait() wakes with no hop through the completion thread.
            if self._callback is None and self._completion_hook is None:
                self._complete(request)
            else:
                completions.submit(partial(self._complete, request))

        request.future.add_done_callback(ended)
        try:
            self._compiled._runner.submit(request)
        except BaseException as error:  # a runner that raises still ends the request once
            request.fail(as_inference_error(error, self._compiled._device_name))
            raise

    def _complete(self, request: Request) -> None:
        """The request ended on its device: run the callback, mark it ended, hand it on."""
        begin = time.perf_counter()
        self._latency_ms = (begin - request.started) * 1e3
        self._completing = threading.get_ident()
        try:
            future = request.future
            if future.exception() is None:
                try:
                    self._tensors.ran(future.result().outputs)
                except Exception:  # noqa: BLE001 - the results stay readable; only the copy failed
                    _log.exception("inferplex: writing results into the output tensors failed")
            if self._callback is not None:
                try:
                    self._callback(self._callback_userdata)
                except Exception:  # noqa: BLE001 - a user callback must not stall requests
                    _log.exception("inferplex: an InferRequest callback raised")
        finally:
            self._completing = None
            hook = self._completion_hook
            self._ended.set()
            try:
                if hook is not None:
                    hook(self)
            finally:
                if request.timeline is not None:
                    request.mark("callback", "callbacks", begin)
                lifecycle.ended()

    def wait(self) -> None:
        """Block until the request ends; raise its error if it failed."""
        if self._completing != threading.get_ident():  # inside its own callback it has ended
            with blocking():
                self._ended.wait()
        self._raise_failure()

    def wait_for(self, timeout: int | float) -> bool:
        """Wait up to ``timeout`` milliseconds (-1: without limit); True when the request has ended."""
        if self._completing == threading.get_ident():
            return True
        with blocking():
            return self._ended.wait(None if timeout < 0 else timeout / 1000.0)

    def _raise_failure(self) -> None:
        request = self._request
        if request is not None and request.future.done():
            error = request.future.exception()
            if error is not None:
                raise error

    def set_callback(self, callback: Callable[[Any], None] | None, userdata: Any = None) -> None:
        """``callback(userdata)`` is called when an async run ends (also on failure)."""
        self._callback, self._callback_userdata = callback, userdata

    def cancel(self) -> None:
        """Requests already handed to a device run to the end; nothing to cancel here."""

    # --- outputs ---------------------------------------------------------------------

    def _result(self) -> RunResult | None:
        request = self._request
        if request is None:
            return None
        if not request.future.done():
            raise RequestBusyError("results are not ready; call wait() first")
        error = request.future.exception()
        if error is not None:
            raise error
        return request.future.result()

    @property
    def results(self) -> InferResults:
        """Outputs of the last run, by name, index or port (readable in its callback too)."""
        result = self._result()
        if result is None:
            raise InputError("this request has not run yet; call infer() or start_async()")
        return InferResults(self._compiled._outputs, result.outputs)

    def _results(self, share_outputs: bool, decode_strings: bool) -> InferResults:
        if not share_outputs:  # the common case: copies, built in one pass
            result = self._result()
            if result is None:
                raise InputError("this request has not run yet; call infer() or start_async()")
            outputs = result.outputs
            copies: dict[str, Any] = {}
            for port in self._compiled._outputs:
                name = port.any_name
                value = outputs[name]
                copies[name] = value.copy() if type(value) is np.ndarray and value.dtype.kind not in "OSU" \
                    else _output_copy(value, False, decode_strings)
            return InferResults._owning(self._compiled._outputs, copies)
        results = self.results
        if share_outputs:  # views of the output tensors where the request holds some
            results = InferResults(self._compiled._outputs, self._tensors.output_views(results))
            if decode_strings:
                return results
        outputs = {port.any_name: _output_copy(value, share_outputs, decode_strings)
                   for port, value in results.items()}
        return InferResults(self._compiled._outputs, outputs)

    def get_profiling_info(self) -> list[ProfilingInfo]:
        """Per-op counters of the last run (ENABLE_PROFILING must be on at compile time)."""
        try:
            result = self._result()
        except (RequestBusyError, InferenceError):
            return []
        except Exception:  # noqa: BLE001 - a failed run has no counters
            return []
        return result.profiling if result is not None else []

    @property
    def profiling_info(self) -> list[ProfilingInfo]:
        return self.get_profiling_info()

    @property
    def latency(self) -> float:
        """Milliseconds the last run took, from start to results."""
        return self._latency_ms

    @property
    def device(self) -> str:
        """Device that ran the last request (MULTI/AUTO: the one chosen)."""
        try:
            result = self._result()
        except Exception:  # noqa: BLE001 - running or failed: no device to name
            return ""
        return result.device if result is not None else ""


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


def _output_copy(value: Any, share: bool, decode_strings: bool) -> Any:
    """A result as ``infer`` returns it: a copy unless shared; strings as str or bytes."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "OSU":
        if decode_strings:
            return value.astype(str) if value.dtype.kind != "U" else value.copy()
        return np.char.encode(value.astype(str)) if value.size else value.astype(bytes)
    if share or not isinstance(value, np.ndarray):
        return value
    return value.copy()


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
