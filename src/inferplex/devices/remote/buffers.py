"""Arrays through a shared, growable memory buffer (one per worker), described by small messages."""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["OutputPlacement", "SharedBuffer", "new_buffer_fd", "read_arrays", "write_arrays"]

_ALIGN = 64
_MIN_SIZE = 1 << 20


def new_buffer_fd() -> int:
    """A file descriptor of anonymous shared memory (``memfd``; a deleted temp file elsewhere)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("inferplex-worker", 0)
    handle = tempfile.TemporaryFile()  # noqa: SIM115 - only its descriptor is kept
    fd = os.dup(handle.fileno())
    handle.close()
    return fd


Pin = Callable[[int, int], Callable[[], None] | None]
"""``pin(address, size)``: page-lock a mapping for a device; returns how to undo it, or None."""


class SharedBuffer:
    """One memory buffer mapped by both processes; either side may grow it.

    ``pin`` (the worker process passes its program's ``pin_host_memory``) is
    called on every new mapping, and its undo before the mapping goes.
    """

    def __init__(self, fd: int, pin: Pin | None = None) -> None:
        self.fd = fd
        self._pin = pin
        self._unpin: Callable[[], None] | None = None
        self._map: mmap.mmap | None = None
        self._bytes: np.ndarray | None = None  # the mapping as bytes: views are slices of it
        self._retired: list[mmap.mmap] = []  # old mappings some array still views
        self.size = 0
        self.follow(os.fstat(fd).st_size)

    @property
    def pinned(self) -> bool:
        """Whether the current mapping is page-locked for a device."""
        return self._unpin is not None

    def follow(self, size: int) -> None:
        """Map at least ``size`` bytes (the other side grew the buffer)."""
        if size <= self.size:
            return
        if self._map is not None:
            self._bytes = None
            self._release(self._map)
        self._map = mmap.mmap(self.fd, size) if size else None
        self.size = size
        if self._map is not None:
            self._bytes = np.frombuffer(self._map, np.uint8)
            if self._pin is not None:
                self._unpin = self._pin(self._bytes.ctypes.data, size)

    def reserve(self, size: int) -> None:
        """Grow the buffer to hold ``size`` bytes (doubling, so that growth is rare)."""
        if size <= self.size:
            return
        new = max(size, 2 * self.size, _MIN_SIZE)
        os.ftruncate(self.fd, new)
        self.follow(new)

    def view(self, dtype: np.dtype, shape: tuple[int, ...], offset: int) -> np.ndarray:
        nbytes = dtype.itemsize * math.prod(shape)
        if nbytes == 0 or self._bytes is None:
            return np.empty(shape, dtype)
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"{nbytes} bytes at offset {offset} do not fit in a buffer of {self.size} bytes")
        return self._bytes[offset:offset + nbytes].view(dtype).reshape(shape)

    def _release(self, old: mmap.mmap) -> None:
        self._unpin_mapping()
        try:
            old.close()
        except BufferError:  # an array still views it: unmapped when the buffer closes
            self._retired.append(old)

    def _unpin_mapping(self) -> None:
        unpin, self._unpin = self._unpin, None
        if unpin is not None:
            unpin()

    def close(self) -> None:
        self._unpin_mapping()
        self._bytes = None
        for old in [*self._retired, *([self._map] if self._map is not None else [])]:
            with contextlib.suppress(BufferError):  # unmapped when the last array viewing it goes
                old.close()
        self._map, self._retired = None, []
        os.close(self.fd)


def _in_buffer(dtype: np.dtype) -> bool:
    """Whether arrays of ``dtype`` travel in the buffer (plain numbers), not in the message."""
    return dtype.kind in "biufc" and dtype.isnative and not dtype.hasobject


def write_arrays(buffer: SharedBuffer, arrays: Mapping[str, Any], start: int = 0) -> tuple[list[Any], int]:
    """Copy ``arrays`` into ``buffer`` from ``start``; their descriptions and the end offset.

    A description is ``(name, dtype, shape, offset)``, or ``(name, array)`` for an
    array that travels in the message itself (object, string or non-native dtypes).
    """
    placed: list[tuple[str, np.ndarray, int]] = []
    described: list[Any] = []
    end = start
    for name, value in arrays.items():
        array = np.asarray(value)
        if not _in_buffer(array.dtype):
            described.append((name, array))
            continue
        end = -(-end // _ALIGN) * _ALIGN
        placed.append((name, array, end))
        end += array.nbytes
    buffer.reserve(end)
    for name, array, offset in placed:
        np.copyto(buffer.view(array.dtype, array.shape, offset), array, casting="no")
        described.append((name, array.dtype.str, array.shape, offset))
    return described, end


class OutputPlacement:
    """Room for one request's outputs in a shared buffer, handed out while the device runs.

    Called as ``host_outputs(name, dtype, shape)`` by ``DeviceProgram.run_into``:
    a view of the buffer after ``start``, or None when the output would not fit
    in the current mapping (growing it would unmap memory the device may still
    read; :func:`write_arrays` places that output, and grows the buffer, after
    the run).
    """

    def __init__(self, buffer: SharedBuffer, start: int) -> None:
        self._buffer = buffer
        self.end = start
        self._placed: dict[str, tuple[np.ndarray, int]] = {}

    def __call__(self, name: str, dtype: Any, shape: tuple[int, ...]) -> np.ndarray | None:
        dtype = np.dtype(dtype)
        if not _in_buffer(dtype) or name in self._placed:
            return None
        offset = -(-self.end // _ALIGN) * _ALIGN
        end = offset + dtype.itemsize * math.prod(shape)
        if end > self._buffer.size:
            return None
        view = self._buffer.view(dtype, shape, offset)
        self._placed[name] = (view, offset)
        self.end = end
        return view

    def describe(self, outputs: Mapping[str, Any]) -> list[Any]:
        """Descriptions of every output, in order: those written in place as they are, the rest copied in."""
        described: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for name, value in outputs.items():
            placed = self._placed.get(name)
            if placed is not None and (value is placed[0] or _same_memory(value, placed[0])):
                described[name] = (name, value.dtype.str, value.shape, placed[1])
            else:
                rest[name] = value
        copied = {entry[0]: entry for entry in write_arrays(self._buffer, rest, self.end)[0]} if rest else {}
        return [described[name] if name in described else copied[name] for name in outputs]


def _same_memory(value: Any, view: np.ndarray) -> bool:
    return (isinstance(value, np.ndarray) and value.shape == view.shape and value.dtype == view.dtype
            and (value.size == 0 or value.ctypes.data == view.ctypes.data))


def read_arrays(buffer: SharedBuffer, described: list[Any], copy: bool) -> dict[str, np.ndarray]:
    """The arrays of a description: views into ``buffer``, or copies when ``copy``."""
    arrays: dict[str, np.ndarray] = {}
    for entry in described:
        if len(entry) == 2:
            arrays[entry[0]] = entry[1]
            continue
        name, dtype, shape, offset = entry
        view = buffer.view(np.dtype(dtype), tuple(shape), offset)
        arrays[name] = view.copy() if copy else view
    return arrays
