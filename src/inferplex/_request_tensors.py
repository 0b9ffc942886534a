"""The tensors an InferRequest holds: one per input and output, as OpenVINO's requests hold them.

Inputs.  A request holds one value per input: an array it owns, the caller's
own array (``share_inputs=True``), an ``ov.Tensor`` given with ``set_tensor``,
or a torch tensor.  A static input it was never given gets an array of zeros
of its shape the first time it is read (``get_input_tensor``) or run, so that

    request.get_input_tensor(0).data[:] = image
    request.infer()

runs on what the caller wrote.  Inputs given to ``infer``/``start_async`` are
placed as OpenVINO's data dispatcher places them:

- ``share_inputs=False`` (InferRequest's default): copied into the request's
  own array (or into the ov.Tensor set on the input), converting the dtype;
- ``share_inputs=True``: a C-contiguous, writable numpy array of the input's
  dtype is held as it is (the run reads the caller's memory); anything else is
  converted or copied;
- an ``ov.Tensor`` is held as it is in both modes.

Outputs.  After a run, an output reads as an ``ov.Tensor`` over the result.
An output tensor once handed out (``get_output_tensor``), or set with
``set_output_tensor``, receives every later result, so a caller may keep it
and read it after each run.

A batch of tensors set with ``set_input_tensors([t0, t1, ...])`` is gathered
along the first axis at each run, so writes into them between runs count.

Pinned arrays.  Where the compiled model runs on one device that can page-lock
host memory (``DeviceProgram.pin_host_memory``: a CUDA GPU), an array the request
owns for an input of static shape, of at least :data:`PIN_MIN_BYTES`, is
page-locked once, when it is made: the device then copies it in directly, and
OpenVINO's copy of the inputs into the request (``share_inputs=False``) replaces
the device's own staging copy instead of adding to it.  The array is unlocked
when the request lets it go.

The methods that name these tensors as OpenVINO does (``get_tensor``,
``set_input_tensor``, ...) are in :mod:`inferplex._tensor_access`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from inferplex._binding import (
    as_array,
    check_inputs,
    convert_input,
    is_ov_tensor,
    port_dims,
    port_dtype,
)
from inferplex._ports import Port
from inferplex.api import packed
from inferplex.api.tensor import Tensor, tensor_owning
from inferplex.errors import InputError

__all__ = ["RequestTensors"]


class _Batch:
    """Tensors set with ``set_input_tensors(list)``: one input's batch, gathered at each run."""

    def __init__(self, tensors: Sequence[Any]) -> None:
        self.tensors = list(tensors)

    def gather(self) -> np.ndarray:
        return np.concatenate([np.asarray(as_array(t)) for t in self.tensors], axis=0)


def _wrap(array: Any, owned: bool = False) -> Any:
    """An ov.Tensor over ``array``'s memory (a copy where it cannot be shared); the value itself
    where it already is an ov.Tensor, or where numpy cannot see it (a torch tensor on a GPU).
    ``owned``: the array is the request's own, so the tensor may reallocate it to grow (a caller
    resizing an input of dynamic shape in place); else it views a caller's memory, and cannot."""
    if is_ov_tensor(array):
        return array
    if not isinstance(array, np.ndarray):
        try:
            array = np.asarray(array)
        except (TypeError, RuntimeError):
            return array
    if owned:
        return tensor_owning(array)
    if array.dtype == object:  # strings
        return Tensor(array)
    share = array.flags.c_contiguous and array.flags.writeable
    return Tensor(array, shared_memory=bool(share))


def _fast_facts(inputs: list[Port]) -> tuple[tuple[np.dtype[Any], tuple[int, ...]], ...] | None:
    """``(dtype, shape)`` of each input when all are tensors of a numeric dtype and a static
    shape (what the fast path of ``bind`` checks an array against), else None."""
    facts = []
    for position, port in enumerate(inputs):
        dtype, dims = port_dtype(port), port_dims(port)
        if port.index != position or not port.is_tensor or dtype is None or dtype.kind == "O" \
                or dims is None or any(type(d) is not int for d in dims):
            return None
        facts.append((dtype, tuple(dims)))
    return tuple(facts)


def _zeros(port: Port) -> np.ndarray:
    """What a request holds for an input or output before anything is written: zeros of its
    shape, with 0 for dynamic dims (as OpenVINO's empty tensors of a dynamic shape)."""
    dims = port_dims(port) or ()
    shape = tuple(d if isinstance(d, int) else 0 for d in dims)
    dtype = port_dtype(port) or np.dtype(np.float32)
    return np.full(shape, "", dtype=object) if dtype.kind == "O" else np.zeros(shape, dtype)


PIN_MIN_BYTES = 256 << 10
"""Owned input arrays this large or larger are page-locked where the device can (a smaller copy
costs less than staging misses, and page-locking has a cost of its own)."""

Pinner = Callable[[int, int], Callable[[], None] | None]
"""``pin(address, size)`` -> the function that unlocks it, or None (``DeviceProgram.pin_host_memory``)."""


def _unpin_all(pins: dict[int, tuple[np.ndarray, Callable[[], None]]]) -> None:
    for _array, unpin in pins.values():
        unpin()
    pins.clear()


class RequestTensors:
    """The tensors of one request (see the module docstring)."""

    def __init__(self, inputs: list[Port], outputs: list[Port], pin: Pinner | None = None) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.input_index = {p.any_name: p.index for p in inputs}
        """``{input name: index}``, built once (``infer`` keys its inputs with it)."""
        self._input_names = [p.any_name for p in inputs]
        self._fast = _fast_facts(inputs)
        self._held: dict[int, Any] = {}
        """Input index -> its value (array, ov.Tensor, torch tensor or _Batch)."""
        self._owned: set[int] = set()
        """Inputs whose arrays belong to the request (given values are copied into them)."""
        self._out: dict[int, Any] = {}
        """Output index -> the tensor that receives its results (handed out or set by the caller)."""
        self._last: dict[str, Any] | None = None
        self.numpy_bound = False
        """Whether the last :meth:`bind` gave numpy arrays alone (it took the fast path)."""
        self._handed_empty: set[int] = set()
        """Dynamic inputs never given whose empty tensor was handed out: they count as given once
        the caller resizes that tensor (or gives a value), so a run before that says they are missing."""
        self._pin = pin
        self._static = {p.index for p in inputs
                        if (dims := port_dims(p)) is not None and all(isinstance(d, int) for d in dims)}
        self._pins: dict[int, tuple[np.ndarray, Callable[[], None]]] = {}
        """Input index -> (its owned array, the function that unlocks it): page-locked arrays."""
        if pin is not None:
            weakref.finalize(self, _unpin_all, self._pins)

    # --- inputs --------------------------------------------------------------------------

    def set_input(self, port: Port, value: Any) -> None:
        """``set_tensor`` on an input: the request reads ``value`` itself from now on."""
        if isinstance(value, (list, tuple)) and port.is_tensor and value and all(
                is_ov_tensor(v) or isinstance(v, np.ndarray) for v in value):
            self._set_batch(port, value)
            return
        converted = convert_input(port, value)
        if port.is_tensor:
            check_inputs([port], {port.index: converted})
        self._hold_given(port.index, converted)

    def _set_batch(self, port: Port, tensors: Sequence[Any]) -> None:
        dims = port_dims(port)
        batch = dims[0] if dims else None
        if isinstance(batch, int) and batch != len(tensors):
            raise InputError(f"input {port.any_name!r} has batch {batch}, but {len(tensors)} tensors "
                             "were given; give one tensor per batch item")
        for tensor in tensors:
            shape = tuple(np.shape(as_array(tensor)))
            if not shape or shape[0] != 1:
                raise InputError(f"batched tensors for input {port.any_name!r} must each have batch "
                                 f"1 on the first axis, got shape {list(shape)}")
        self._hold_given(port.index, _Batch(tensors))

    def input_tensor(self, port: Port) -> Any:
        """The input's tensor: an ov.Tensor sharing the request's memory."""
        held = self._held.get(port.index)
        if isinstance(held, _Batch):
            raise InputError("get_tensor shall not be used together with batched set_tensors/"
                             f"set_input_tensors: input {port.any_name!r} was set with a batch of "
                             "tensors; read those tensors instead")
        if held is None:
            held = self._default(port)
            if held is None:  # a dynamic input: an empty tensor the caller may resize and fill
                if not port.is_tensor:
                    return _wrap(_zeros(port))
                held = _zeros(port)
                self._held[port.index] = held
                self._owned.add(port.index)
                self._handed_empty.add(port.index)
        if is_ov_tensor(held) or not isinstance(held, np.ndarray):
            return _wrap(held)
        owned = port.index in self._owned
        tensor = _wrap(held, owned=owned)
        if is_ov_tensor(tensor) and owned:
            # Hold the tensor itself: later copies go into the memory the caller writes to, and a
            # shape the caller sets on it (reallocating it) is what the next run reads.
            self._held[port.index] = tensor
        return tensor

    def _default(self, port: Port) -> Any:
        """Zeros for a static input never given (None for a dynamic one: it must be given)."""
        dims = port_dims(port)
        if not port.is_tensor or dims is None or any(not isinstance(d, int) for d in dims):
            return None
        self._hold_owned(port.index, _zeros(port))
        return self._held[port.index]

    def _still_empty(self, index: int, held: Any) -> bool:
        """Whether ``held`` is the empty tensor handed out for a dynamic input never given."""
        if index not in self._handed_empty:
            return False
        if is_ov_tensor(held) and held.size == 0:
            return True
        self._handed_empty.discard(index)
        return False

    def bind(self, keyed: Mapping[int, Any], share: bool) -> dict[str, Any]:
        """Place the given values (``{input index: value}``) and return ``{input name: array}`` to run.

        Values are converted and every input checked before anything is placed,
        so a refused call leaves the request's tensors as they were.
        """
        if self._fast is not None and len(keyed) == len(self._fast):
            bound = self._bind_exact(keyed, share)
            if bound is not None:
                return bound
        self.numpy_bound = False
        converted: dict[int, Any] = {}
        refused: dict[int, str] = {}
        for index, value in keyed.items():
            try:
                converted[index] = convert_input(self.inputs[index], value)
            except InputError as error:
                refused[index] = str(error)
        values = {**{i: self._run_value(h) for i, h in self._held.items()
                     if i not in keyed and not self._still_empty(i, h)},
                  **converted}
        for port in self.inputs:
            if port.index not in values and port.index not in keyed and self._default(port) is not None:
                values[port.index] = self._held[port.index]
        check_inputs(self.inputs, values, refused)
        for index, value in converted.items():
            self._place(index, keyed[index], value, share)
        return {p.any_name: self._run_value(self._held[p.index]) for p in self.inputs}

    def _bind_exact(self, keyed: Mapping[int, Any], share: bool) -> dict[str, Any] | None:
        """``bind`` for the common case, or None (and nothing placed) elsewhere: every value a
        numpy array of its input's exact dtype and static shape, going where no ov.Tensor is held.
        Such arrays need no conversion or check: they are held as they are (``share``, where
        C-contiguous and writable), else copied into the request's own array of that input."""
        fast, held, owned = self._fast, self._held, self._owned
        assert fast is not None
        for index, value in keyed.items():
            if type(value) is not np.ndarray:
                return None
            dtype, shape = fast[index]
            if value.dtype != dtype or value.shape != shape or isinstance(held.get(index), Tensor):
                return None
        self.numpy_bound = True
        for index, value in keyed.items():
            if share and value.flags.c_contiguous and value.flags.writeable:
                if self._pins:
                    self._unpin(index)
                held[index] = value  # held as given (see _hold_given)
                owned.discard(index)
                continue
            mine = held.get(index)
            if not share and type(mine) is np.ndarray and index in owned and mine.shape == value.shape \
                    and mine.dtype == value.dtype:
                mine[...] = value
                if self._pin is not None and index not in self._pins and mine.nbytes >= PIN_MIN_BYTES:
                    self._lock_pages(index, mine)
                continue
            self._hold_owned(index, np.array(value, order="C", copy=True))
        bound = {}
        for index, name in enumerate(self._input_names):  # a loop: no comprehension frame
            bound[name] = held[index]
        return bound

    def _place(self, index: int, given: Any, value: Any, share: bool) -> None:
        port = self.inputs[index]
        if is_ov_tensor(value) or not isinstance(value, np.ndarray) or not port.is_tensor:
            self._hold_given(index, value)  # ov.Tensor, torch tensor, sequence or optional: as given
            return
        if isinstance(given, np.ndarray):
            fresh = value is not given  # converted: a copy nobody else holds
        else:  # scalars and lists are new arrays; an __array__ object may view its own memory
            fresh = not hasattr(given, "__array__")
        if share:  # OpenVINO: a new tensor over the caller's memory where it can, else a copy
            if not fresh and value.flags.c_contiguous and value.flags.writeable:
                self._hold_given(index, value)
            else:
                # A copy per call (the next shared call replaces it): not worth page-locking.
                copy = value if fresh else np.array(value, order="C", copy=True)
                self._hold_owned(index, copy, lasting=False)
            return
        held = self._held.get(index)
        if is_ov_tensor(held) and _copy_into(held, value):
            return  # OpenVINO copies into the tensor the input holds, the caller's one included
        if index in self._owned and isinstance(held, np.ndarray) and held.shape == value.shape \
                and held.dtype == value.dtype:
            np.copyto(held, value)
            if self._pin is not None:
                self._lock_pages(index, held)
            return
        self._hold_owned(index, value if fresh else np.array(value, order="C", copy=True))

    def _hold_owned(self, index: int, array: np.ndarray, lasting: bool = True) -> None:
        """Hold an array the request owns; one that later calls copy into (``lasting``) is page-locked
        where the device can (see the module docstring)."""
        self._unpin(index)
        self._held[index] = array
        self._owned.add(index)
        if lasting:
            self._lock_pages(index, array)

    def _lock_pages(self, index: int, array: np.ndarray) -> None:
        """Page-lock an owned array that later calls copy into, where the device can."""
        if self._pin is not None and index not in self._pins and array.nbytes >= PIN_MIN_BYTES \
                and array.flags.c_contiguous and index in self._static:  # a dynamic input's array changes
            unpin = self._pin(array.ctypes.data, array.nbytes)
            if unpin is not None:
                self._pins[index] = (array, unpin)

    def _hold_given(self, index: int, value: Any) -> None:
        """Hold a value the caller gave (read in place, never written by the request)."""
        if self._pins:
            self._unpin(index)
        self._held[index] = value
        self._owned.discard(index)

    def _unpin(self, index: int) -> None:
        pinned = self._pins.pop(index, None)
        if pinned is not None:
            pinned[1]()

    @staticmethod
    def _run_value(held: Any) -> Any:
        return held.gather() if isinstance(held, _Batch) else as_array(held)

    def snapshot_inputs(self) -> dict[str, Any]:
        """``{input name: array}`` of what the request holds now (for a run without inputs)."""
        return self.bind({}, share=True)

    # --- outputs -------------------------------------------------------------------------

    def set_output(self, port: Port, tensor: Any) -> None:
        """``set_tensor`` on an output: later results are written into ``tensor``."""
        if not (is_ov_tensor(tensor) or isinstance(tensor, np.ndarray)):
            raise InputError(f"output {port.any_name!r}: set an ov.Tensor or a numpy array, "
                             f"not {type(tensor).__name__}")
        self._out[port.index] = tensor
        if self._last is not None:
            _copy_into(tensor, self._last[port.any_name])

    def ran(self, outputs: Mapping[str, Any]) -> None:
        """A run ended with ``outputs``: write them into the output tensors held."""
        self._last = dict(outputs)
        for index, tensor in list(self._out.items()):
            value = outputs[self.outputs[index].any_name]
            if not _copy_into(tensor, value):
                self._out[index] = _wrap(value)  # grew past a shared buffer: a new tensor

    def output_views(self, results: Mapping[Port, Any]) -> dict[str, Any]:
        """``{output name: array}``: views of the output tensors' memory (``share_outputs=True``):
        the tensors set on the outputs where held, else the request's last results, which its
        output tensors read; the next run writes there (as OpenVINO's shared outputs)."""
        views: dict[str, Any] = {}
        for port, value in results.items():
            held = self._out.get(port.index)
            source = np.asarray(held) if held is not None else value
            views[port.any_name] = source.view() if type(source) is np.ndarray else source
        return views

    def output_tensor(self, port: Port) -> Any:
        """The output's tensor: the one held, else the last result (or zeros before any run)."""
        held = self._out.get(port.index)
        if held is not None:
            return held
        value = _zeros(port) if self._last is None else self._last[port.any_name]
        tensor = _wrap(value, owned=True)  # later results of another shape reallocate it
        if is_ov_tensor(tensor):
            self._out[port.index] = tensor
        return tensor


def _copy_into(tensor: Any, value: Any) -> bool:
    """Copy ``value`` into ``tensor`` (an ov.Tensor or array), taking its shape; False if it cannot.
    An ov.Tensor of a sub-byte type (u4, i4, ...) gets the values packed: as OpenVINO's, its
    ``data`` is the packed bytes."""
    try:
        array = np.asarray(value)
        if is_ov_tensor(tensor):
            if tuple(tensor.shape) != array.shape:
                tensor.shape = list(array.shape)
            target = tensor.data
            if bits := packed.packed_bits(tensor.element_type):
                values = array.astype(tensor.element_type.to_dtype(), copy=False)
                array = packed.pack(packed.to_codes(values, bits), bits).view(target.dtype)
        else:
            target = tensor
        if target.shape != array.shape:
            return False
        target[...] = array
    except (InputError, ValueError, TypeError, RuntimeError):
        return False
    return True
