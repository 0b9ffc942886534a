"""CompiledModel and InferRequest (OpenVINO's runtime API; AsyncInferQueue is in :mod:`.async_queue`).

Every started request ends exactly once, with results or an error: the
executor's completion callback stores the outcome, runs the user's callback
(whose exceptions are logged, never allowed to stall the queue) and only then
marks the request ready, so ``wait()`` returns after the callback has run.
A failed request raises its error from ``wait()``, ``infer()`` and ``results``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from inferplex.binding import InferResults, bind_inputs, copy_inputs
from inferplex.devices.base import ProfilingRecord
from inferplex.errors import InferenceError, InferplexError, InputError, PropertyError, RequestBusyError
from inferplex.executor import Executor, RunResult
from inferplex.model import Model, Port, _find_port

__all__ = ["CompiledModel", "InferRequest", "in_completion_callback"]

_log = logging.getLogger("inferplex")

_callbacks = threading.local()  # .depth: completion callbacks running on this thread


def in_completion_callback() -> bool:
    """True on a thread that is running a request's completion callback."""
    return getattr(_callbacks, "depth", 0) > 0


def _as_inference_error(error: BaseException, device: str) -> BaseException:
    if isinstance(error, InferplexError):
        return error
    wrapped = InferenceError(f"inference failed on {device}: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


class CompiledModel:
    """A model compiled for a device (single or virtual); create requests from it."""

    def __init__(self, model: Model, executor: Executor, device_name: str,
                 config: Mapping[str, Any]) -> None:
        self._model = model
        self._inputs = [port.snapshot() for port in model.inputs]  # the ports compiled with
        self._outputs = [port.snapshot() for port in model.outputs]
        self._executor = executor
        self._device_name = device_name
        self._config = dict(config)
        self._default_request: InferRequest | None = None
        self._lock = threading.Lock()

    @property
    def executor(self) -> Executor:
        return self._executor

    @property
    def inputs(self) -> list[Port]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[Port]:
        return list(self._outputs)

    def input(self, key: int | str | Port = 0) -> Port:
        return _find_port(self.inputs, key, "input")

    def output(self, key: int | str | Port = 0) -> Port:
        return _find_port(self.outputs, key, "output")

    def create_infer_request(self) -> InferRequest:
        return InferRequest(self)

    def __call__(self, inputs: Any = None) -> InferResults:
        """Run one inference synchronously (OpenVINO's ``compiled_model(inputs)``)."""
        with self._lock:
            if self._default_request is None:
                self._default_request = self.create_infer_request()
        return self._default_request.infer(inputs)

    def get_property(self, key: str) -> Any:
        """Read a property: hints and settings, OPTIMAL_NUMBER_OF_INFER_REQUESTS, EXECUTION_DEVICES, ..."""
        name = str(key).upper()
        if name == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self._executor.optimal_number_of_infer_requests
        if name == "EXECUTION_DEVICES":
            return list(self._executor.execution_devices)
        if name in ("NETWORK_NAME", "MODEL_NAME"):
            return self._model.friendly_name
        if name == "SUPPORTED_PROPERTIES":
            return self._supported_properties()
        try:
            return self._executor.get_property(name)
        except KeyError:
            pass
        if name in self._config:
            return self._config[name]
        raise PropertyError(f"compiled model on {self._device_name} has no property {key!r}; "
                            f"it has: {', '.join(self._supported_properties())}")

    def _supported_properties(self) -> list[str]:
        """Every key get_property answers: the model's, the executor's (its devices'), the settings."""
        names = ["OPTIMAL_NUMBER_OF_INFER_REQUESTS", "EXECUTION_DEVICES", "NETWORK_NAME",
                 "SUPPORTED_PROPERTIES", *self._executor.property_names(), *self._config]
        return list(dict.fromkeys(names))

    def set_property(self, properties: Mapping[str, Any]) -> None:
        """Change properties after compilation (e.g. MULTI_DEVICE_PRIORITIES on MULTI)."""
        from inferplex.properties import normalize_config

        parsed = normalize_config(properties, target=self._device_name)
        self._executor.set_property(parsed)
        self._config.update(parsed)

    def release(self) -> None:
        """Stop workers and release device memory."""
        self._executor.close()

    def __repr__(self) -> str:
        return f"<CompiledModel {self._model.friendly_name!r} on {self._device_name}>"


class InferRequest:
    """One inference request: sync ``infer`` or ``start_async`` + ``wait``."""

    def __init__(self, compiled: CompiledModel) -> None:
        self._compiled = compiled
        self._inputs_set: dict[int, Any] = {}
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._callback: Callable[[Any], None] | None = None
        self._callback_userdata: Any = None
        self._completion_hook: Callable[[InferRequest], None] | None = None
        self._ready = threading.Event()
        self._ready.set()
        self._lock = threading.Lock()
        self._started = 0.0
        self._latency_ms = 0.0
        self.userdata: Any = None

    @property
    def model_inputs(self) -> list[Port]:
        return self._compiled.inputs

    @property
    def model_outputs(self) -> list[Port]:
        return self._compiled.outputs

    # --- inputs ----------------------------------------------------------------------

    def set_tensor(self, key: int | str | Port, tensor: Any) -> None:
        """Set one input (by name, index or port) for the next run without inputs."""
        port = _find_port(self._compiled.inputs, key, "input")
        self._inputs_set[port.index] = tensor

    def set_input_tensor(self, *args: Any) -> None:
        """``set_input_tensor(tensor)`` for one-input models, or ``(index, tensor)``."""
        index, tensor = (0, args[0]) if len(args) == 1 else (args[0], args[1])
        self.set_tensor(index, tensor)

    def set_input_tensors(self, tensors: Mapping[int | str, Any]) -> None:
        for key, tensor in tensors.items():
            self.set_tensor(key, tensor)

    def _bind(self, inputs: Any) -> dict[str, Any]:
        return bind_inputs(self._compiled._inputs, inputs, self._inputs_set)

    # --- running ---------------------------------------------------------------------

    def _begin(self) -> None:
        with self._lock:
            if not self._ready.is_set():
                raise RequestBusyError("this InferRequest is still running; call wait() before "
                                       "starting it again, or use more requests (AsyncInferQueue)")
            self._ready.clear()
            self._result, self._error = None, None
            self._started = time.perf_counter()

    def infer(self, inputs: Any = None, share_inputs: bool = True) -> InferResults:
        """Run synchronously and return the results."""
        del share_inputs  # inputs are never copied unless a device must
        bound = self._bind(inputs)
        self._begin()
        try:
            result = self._compiled.executor.run(bound)
        except BaseException as error:
            self._complete(error, run_callbacks=False)
            raise _as_inference_error(error, self._compiled._device_name) from error
        self._complete(result, run_callbacks=False)
        return self.results

    def start_async(self, inputs: Any = None, userdata: Any = None, share_inputs: bool = True) -> None:
        """Start without waiting; the callback runs when the request ends.

        With ``share_inputs=True`` (the default) the request reads the caller's
        arrays while it runs, so they must stay unchanged until it ends; with
        False they are copied first and may be reused at once.
        """
        bound = self._bind(inputs)
        self._start_bound(bound if share_inputs else copy_inputs(bound), userdata)

    def _start_bound(self, bound: dict[str, Any], userdata: Any) -> None:
        self._begin()
        self.userdata = userdata
        try:
            self._compiled.executor.submit(bound, self._complete)
        except BaseException as error:  # a submit that fails still ends the request once
            self._complete(error)
            raise

    def _complete(self, outcome: RunResult | BaseException, run_callbacks: bool = True) -> None:
        self._latency_ms = (time.perf_counter() - self._started) * 1e3
        if isinstance(outcome, BaseException):
            self._error = _as_inference_error(outcome, self._compiled._device_name)
        else:
            self._result = outcome
        if not run_callbacks:
            self._ready.set()
            return
        _callbacks.depth = getattr(_callbacks, "depth", 0) + 1
        try:
            if self._callback is not None:
                try:
                    self._callback(self._callback_userdata)
                except Exception:  # noqa: BLE001 - a user callback must not stall requests
                    _log.exception("inferplex: an InferRequest callback raised")
        finally:
            hook = self._completion_hook
            self._ready.set()
            try:
                if hook is not None:
                    hook(self)
            finally:
                _callbacks.depth -= 1

    def wait(self) -> None:
        """Block until the request ends; raise its error if it failed."""
        self._compiled.executor.wait(self._ready)
        if self._error is not None:
            raise self._error

    def wait_for(self, timeout: int | float) -> bool:
        """Wait up to ``timeout`` milliseconds; True when the request has ended."""
        if timeout < 0:
            self._compiled.executor.wait(self._ready)
            return True
        return self._compiled.executor.wait(self._ready, timeout / 1000.0)

    def set_callback(self, callback: Callable[[Any], None] | None, userdata: Any = None) -> None:
        """``callback(userdata)`` is called when an async run ends (also on failure)."""
        self._callback, self._callback_userdata = callback, userdata

    def cancel(self) -> None:
        """Requests already handed to a device run to the end; nothing to cancel here."""

    # --- outputs ---------------------------------------------------------------------

    @property
    def results(self) -> InferResults:
        """Outputs of the last run, by name, index or port."""
        if not self._ready.is_set():
            raise RequestBusyError("results are not ready; call wait() first")
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise InputError("this request has not run yet; call infer() or start_async()")
        return InferResults(self._compiled._outputs, self._result.outputs)

    def get_tensor(self, key: int | str | Port) -> Any:
        """An output of the last run, or an input set with set_tensor."""
        name = key.any_name if isinstance(key, Port) else key
        output_names = {p.any_name for p in self._compiled.outputs}
        if isinstance(name, str) and name not in output_names:
            port = _find_port(self._compiled.inputs, name, "input")
            return self._inputs_set.get(port.index)
        return self.results[name]

    def get_output_tensor(self, index: int = 0) -> Any:
        return self.results[index]

    def get_profiling_info(self) -> list[ProfilingRecord]:
        """Per-op counters of the last run (ENABLE_PROFILING must be on at compile time)."""
        return self._result.profiling if self._result is not None else []

    @property
    def profiling_info(self) -> list[ProfilingRecord]:
        return self.get_profiling_info()

    @property
    def latency(self) -> float:
        """Milliseconds the last run took, from start to results."""
        return self._latency_ms

    @property
    def device(self) -> str:
        """Device that ran the last request (MULTI/AUTO: the one chosen)."""
        return self._result.device if self._result is not None else ""
