"""InferRequest (OpenVINO's runtime API; AsyncInferQueue is in :mod:`._async_queue`).

Every started request ends exactly once, through its
:class:`~inferplex.engine.request.Request` future.  When an asynchronous request
ends, its completion runs on the compiled model's completion executor (never
on a device's thread): first the user's callback, then the request is marked
ended, so ``wait()`` returns after the callback has run.  The results are
readable from the moment the request has ended on its device, inside its own
callback too.  A failed request raises its error from ``wait()``, ``infer()``
and ``results``.

As in OpenVINO, an exception the callback raises never stalls anything: the
request still ends, and ``wait()`` and ``wait_for()`` raise an
:class:`~inferplex.errors.InferenceError` chained to it, on every call, until
the request is started again.  The userdata the callback gets is the one the
request holds (its ``userdata``): ``set_callback(callback, userdata)`` sets it,
and so does ``start_async(inputs, userdata)`` where ``userdata`` is not None.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np

from inferplex._binding import InferResults, keyed_inputs, note_caller_streams
from inferplex._ports import port_listing
from inferplex._request_tensors import RequestTensors
from inferplex._tensor_access import TensorAccess
from inferplex.devices.base import ProfilingInfo
from inferplex.engine import lifecycle
from inferplex.engine.completions import blocking
from inferplex.engine.device_pool import as_inference_error
from inferplex.engine.latch import Latch
from inferplex.engine.request import Outcome, Request, RunResult
from inferplex.errors import InferenceError, InputError, RequestBusyError
from inferplex.state.request_state import RequestStates, VariableState

if TYPE_CHECKING:
    from inferplex._compiled_model import CompiledModel

__all__ = ["InferRequest"]

_log = logging.getLogger("inferplex")


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
        self._userdata: Any = None
        self._callback_error: BaseException | None = None  # what the last run's callback raised
        self._completion_hook: Callable[[InferRequest], None] | None = None
        self._ended = Latch(is_set=True)
        self._completing: int | None = None  # the thread running this request's completion
        self._lock = threading.Lock()
        self._latency_ms = 0.0
        self._output_names = [port.any_name for port in compiled._outputs]
        plan = compiled._state_plan
        self._states = RequestStates(plan) if plan is not None else None

    def get_compiled_model(self) -> CompiledModel:
        """The compiled model this request belongs to."""
        return self._compiled

    def __repr__(self) -> str:
        return f"<InferRequest:{port_listing(self._compiled._inputs, self._compiled._outputs)}>"

    def _check_idle(self) -> None:
        if not self._ended.is_set() and self._completing != threading.get_ident():
            raise RequestBusyError("this InferRequest is still running; call wait() before "
                                   "changing its tensors or starting it again")

    def _bind(self, inputs: Any, share_inputs: bool = False) -> dict[str, Any]:
        """Place ``inputs`` in the request's tensors; ``{input name: array}`` to run."""
        if not self._ended.is_set():
            self._check_idle()
        tensors = self._tensors
        if type(inputs) is dict:
            by_name = tensors.input_index
            keyed: dict[int, Any] = {}
            try:  # the common case, at once: every key an input's name (a loop: no comprehension frame)
                for key, value in inputs.items():
                    keyed[by_name[key]] = value
            except (KeyError, TypeError):  # indices, ports, unknown names: sorted out (and named) below
                keyed = keyed_inputs(tensors.inputs, inputs, by_name)
        else:
            keyed = keyed_inputs(tensors.inputs, inputs, by_name=tensors.input_index)
        return tensors.bind(keyed, share_inputs)

    # --- running ---------------------------------------------------------------------

    def _begin(self, bound: Mapping[str, Any],
               on_end: Callable[[Outcome[RunResult]], None] | None = None) -> Request:
        """A new request over ``bound``; ``on_end``: its future's done-callback."""
        with self._lock:
            if not self._ended.clear_if_set():
                raise RequestBusyError("this InferRequest is still running; call wait() before "
                                       "starting it again, or use more requests (AsyncInferQueue)")
            if self._states is not None:  # the variables' values go in with the inputs
                bound = {**bound, **self._states.feeds()}
            request = Request(bound, self._compiled._timeline, self._compiled._expected, on_end)
            self._request = request
            self._callback_error = None
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
        result: RunResult | None = None
        try:
            result = self._compiled._runner.run(request)  # returns only the result the request ended with
            self._tensors.ran(result.outputs)
            if self._states is not None:
                self._states.ran(result.outputs)
        except Exception as error:  # noqa: BLE001 - the request ends with it; results raises it
            request.fail(as_inference_error(error, self._compiled._device_name))
            result = None
        except BaseException as error:  # KeyboardInterrupt: end the request, let it through
            request.fail(InferenceError(f"the run was interrupted: {type(error).__name__}"))
            raise
        finally:
            self._latency_ms = (perf_counter() - request.started) * 1e3
            self._ended.set()
        return self._results(share_outputs, decode_strings, result)

    def start_async(self, inputs: Any = None, userdata: Any = None, share_inputs: bool = False) -> None:
        """Start without waiting; the callback runs when the request ends.

        ``userdata``: where not None, it replaces the userdata the request
        holds, which this run's callback and later ones get (OpenVINO's rule:
        ``set_callback(cb, "a"); start_async(x, "b"); start_async(x)`` calls
        ``cb("b")`` twice).  With no callback set it is dropped, with a
        RuntimeWarning, as OpenVINO drops it.

        ``share_inputs`` as in :meth:`infer`: with False (the default) the
        inputs are copied and the caller may reuse its arrays at once; with
        True arrays read in place must stay unchanged until the request ends.
        """
        bound = self._bind(inputs, share_inputs)
        if userdata is not None:
            if self._callback is not None:
                self._userdata = userdata
            else:
                warnings.warn("There is no callback function! start_async() was given userdata, which "
                              "only a callback receives, so it is dropped; call "
                              "set_callback(callback, userdata) first", RuntimeWarning, stacklevel=2)
        self._start_bound(bound)

    @property
    def userdata(self) -> Any:
        """The userdata the callback gets (read-only, as in OpenVINO): the last non-None one given to
        ``start_async`` or ``set_callback`` (``set_callback`` sets it even to None); None at first."""
        return self._userdata

    def _start_bound(self, bound: dict[str, Any]) -> None:
        if not self._tensors.numpy_bound:  # numpy arrays alone have no CUDA stream to note
            note_caller_streams(bound)  # the run starts on another thread: see note_caller_streams
        completions = self._compiled._completions

        def ended(_: object) -> None:
            # Nothing of the user's to run (no callback, no queue hook): end it here, on the
            # device thread, so that wait() wakes with no hop through the completion thread.
            if self._callback is None and self._completion_hook is None:
                self._complete(request)
            else:
                completions.submit(partial(self._complete, request))

        request = self._begin(bound, ended)
        lifecycle.started()
        try:
            self._compiled._runner.submit(request)
        except BaseException as error:  # a runner that raises still ends the request once
            request.fail(as_inference_error(error, self._compiled._device_name))
            raise

    def _complete(self, request: Request) -> None:
        """The request ended on its device: run the callback, mark it ended, hand it on."""
        begin = perf_counter()
        self._latency_ms = (begin - request.started) * 1e3
        self._completing = threading.get_ident()
        try:
            result, error = request.future.settled()
            if error is None:
                try:
                    self._tensors.ran(result.outputs)
                except Exception:  # noqa: BLE001 - the results stay readable; only the copy failed
                    _log.exception("inferplex: writing results into the output tensors failed")
                if self._states is not None:
                    self._states.ran(result.outputs)
            callback = self._callback
            if callback is not None:
                try:
                    callback(self._userdata)
                except Exception as raised:  # noqa: BLE001 - must not stall requests; wait() raises it
                    _log.debug("inferplex: an InferRequest callback raised", exc_info=True)
                    self._callback_error = raised
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
        """Block until the request ends; raise its error if it failed, or if its callback raised.

        A request never started returns at once."""
        if self._completing != threading.get_ident():  # inside its own callback it has ended
            with blocking():
                self._ended.wait()
        self._raise_failure()

    def wait_for(self, timeout: int | float) -> bool:
        """Wait up to ``timeout`` milliseconds (-1: without limit); True when the request has ended.

        False at once for a request never started (OpenVINO's answer: it has no run to end).
        Raises as :meth:`wait` does once the request has ended."""
        if self._request is None:
            return False
        if self._completing == threading.get_ident():
            return True
        with blocking():
            ended = self._ended.wait(None if timeout < 0 else timeout / 1000.0)
        if ended:
            self._raise_failure()
        return ended

    def _raise_failure(self) -> None:
        """Raise the ended request's error, else an error chained to what its callback raised."""
        request = self._request
        if request is not None and request.future.done():
            error = request.future.exception()
            if error is not None:
                raise error
        raised = self._callback_error
        if raised is not None:
            raise InferenceError(
                f"the callback of this InferRequest raised {type(raised).__name__}: {raised}. The run "
                "itself ended and its results are readable; catch exceptions inside the callback, "
                "or start the request again (which clears this error)") from raised

    def set_callback(self, callback: Callable[[Any], None] | None, userdata: Any = None) -> None:
        """``callback(userdata)`` is called when an async run ends (also on failure).

        ``userdata`` becomes the request's :attr:`userdata` (``start_async`` may replace it).
        What the callback raises is raised by the next ``wait()``/``wait_for()``."""
        self._callback, self._userdata = callback, userdata

    # --- variables (stateful models, see inferplex.state) -------------------------------------

    def query_state(self) -> list[VariableState]:
        """The request's variables, one ``VariableState`` each (none for a model without state)."""
        return self._states.states() if self._states is not None else []

    def reset_state(self) -> None:
        """Unset every variable: the next run reads their initial values (zeros where they have none)."""
        self._check_idle()
        if self._states is not None:
            self._states.reset()

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
        """Outputs of the last run, by name, index or port (readable in its callback too).

        Before any run, as in OpenVINO, the request's output tensors: zeros of each output's
        shape, with 0 for a dynamic dimension (an empty tensor), or the tensors set on them."""
        result = self._result()
        ports = self._compiled._outputs
        if result is None:
            return InferResults(ports, {port.any_name: np.asarray(self._tensors.output_tensor(port))
                                        for port in ports})
        return InferResults(ports, result.outputs)

    def _results(self, share_outputs: bool, decode_strings: bool,
                 ran: RunResult | None = None) -> InferResults:
        """What ``infer`` returns; ``ran``: the result the request just ended with, if it succeeded."""
        if not share_outputs:  # the common case: copies, built in one pass
            result = ran if ran is not None else self._result()
            if result is None:
                raise InputError("this request has not run yet; call infer() or start_async()")
            outputs = result.outputs
            copies: dict[str, Any] = {}
            for name in self._output_names:
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


def _output_copy(value: Any, share: bool, decode_strings: bool) -> Any:
    """A result as ``infer`` returns it: a copy unless shared; strings as str or bytes."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "OSU":
        if decode_strings:
            return value.astype(str) if value.dtype.kind != "U" else value.copy()
        return np.char.encode(value.astype(str)) if value.size else value.astype(bytes)
    if share or not isinstance(value, np.ndarray):
        return value
    return value.copy()
