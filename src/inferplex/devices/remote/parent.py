"""The caller's side: start a worker process, compile there, run requests through it."""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Collection, Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from inferplex import errors
from inferplex.devices.base import DeviceProgram, ProfilingRecord
from inferplex.devices.remote.buffers import (
    SharedBuffer,
    new_buffer_fd,
    read_arrays,
    write_arrays,
)
from inferplex.errors import CompileError, InferenceError, InferplexError, InputError

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.registry import DeviceRegistry

__all__ = ["WorkerProcessProgram", "compile_in_worker_process", "supported"]

_CLOSE_WAIT_SECONDS = 10.0
"""Seconds ``close()`` waits for a worker process to end after asking it to (then kills it)."""

_EXIT_WAIT_SECONDS = 2.0
"""Seconds interpreter exit waits, for all worker processes at once, before killing those left.

At exit every request has ended already (:mod:`inferplex.engine.lifecycle` waits for
them first, and ends those of a hung device with an error): a worker process that
does not end within this time serves a hung device, and waiting
``_CLOSE_WAIT_SECONDS`` for each in turn would hold the process that long per worker."""

_live: weakref.WeakSet[WorkerProcessProgram] = weakref.WeakSet()
_exit_hooked = False
_exit_lock = threading.Lock()


def supported() -> bool:
    """Whether worker processes can be started here (POSIX: descriptors pass between processes)."""
    return os.name == "posix" and hasattr(socket, "send_fds")


def error_from(device: str, kind: str, message: str) -> InferplexError:
    """The caller-side exception for an error the worker process reported."""
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, InferplexError):
        return cls(message)
    return InferenceError(f"inference failed on {device}: {kind}: {message}")


class WorkerProcessProgram(DeviceProgram):
    """A program compiled and run in a worker process (see the package docstring).

    Its ``num_workers`` are the worker process's request slots: two per device
    worker, each with its own socket and shared buffer.
    """

    tensor_kind = "numpy"
    loaded_from_cache = False
    """Whether the worker process imported the program from the model cache."""

    def __init__(self, device: str, process: subprocess.Popen[bytes], control: Connection,
                 workers: list[tuple[Connection, SharedBuffer]], profiling: bool) -> None:
        self.device = device
        self.num_workers = len(workers)
        self._process = process
        self._control = control
        self._control_lock = threading.Lock()
        self._workers = workers
        self._profiling = profiling
        self._records: list[list[ProfilingRecord]] = [[] for _ in workers]
        self._closed = False
        self._finalizer = weakref.finalize(self, _stop, process, control, workers)
        _stop_all_at_exit_first()
        _live.add(self)

    @property
    def pid(self) -> int:
        """The worker process's id."""
        return self._process.pid

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        self.check_runnable(worker, self._closed)
        if not isinstance(inputs, Mapping):
            raise InputError(f"inputs must be a mapping of input name to tensor, got {type(inputs).__name__}")
        sock, buffer = self._workers[worker]
        try:
            described, end = write_arrays(buffer, inputs)
        except (TypeError, ValueError, RuntimeError) as error:
            raise InputError(f"{self.device} (in a worker process) takes numpy arrays or host tensors: "
                             f"{type(error).__name__}: {error}") from error
        try:
            sock.send(("run", buffer.size, described, end))
            reply = sock.recv()
        except (EOFError, OSError) as error:
            raise self._ended() from error
        if reply[0] == "error":
            raise error_from(self.device, reply[1], reply[2])
        _, size, outputs, records = reply
        buffer.follow(size)
        if self._profiling:
            self._records[worker] = list(records or ())
        return read_arrays(buffer, outputs, copy=True)

    def _ended(self) -> InferenceError:
        code = self._process.poll()
        state = f"exited with code {code}" if code is not None else "stopped answering"
        return InferenceError(f"the worker process serving {self.device} (pid {self._process.pid}) {state}")

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        return list(self._records[worker]) if 0 <= worker < self.num_workers else []

    def get_property(self, key: str) -> Any:
        reply = self._ask(("property", key))
        if reply[0] == "error":
            if reply[1] == "KeyError":
                raise KeyError(key)
            raise error_from(self.device, reply[1], reply[2])
        return reply[1]

    def property_names(self) -> tuple[str, ...]:
        reply = self._ask(("property_names",))
        if reply[0] == "error":
            raise error_from(self.device, reply[1], reply[2])
        return tuple(reply[1])

    def _ask(self, message: tuple[Any, ...]) -> tuple[Any, ...]:
        """One control message to the worker process, and its reply."""
        with self._control_lock:
            try:
                self._control.send(message)
                reply: tuple[Any, ...] = self._control.recv()
            except (EOFError, OSError) as error:
                raise self._ended() from error
        return reply

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._finalizer()


def _stop_all_at_exit_first() -> None:
    """Register :func:`_stop_all_at_exit` (once).  ``atexit`` runs hooks last registered first:
    this one runs before ``weakref.finalize``'s (which stop worker processes one by one) and after
    the engine's wait for requests in flight, which compiled models register again after it."""
    global _exit_hooked
    with _exit_lock:
        if not _exit_hooked:
            atexit.register(_stop_all_at_exit)
            _exit_hooked = True


def _stop_all_at_exit() -> None:
    """Ask every worker process to end at once, wait :data:`_EXIT_WAIT_SECONDS` in all, kill the rest."""
    programs = list(_live)
    for program in programs:
        if not program._closed and program._control_lock.acquire(timeout=0.1):
            try:
                program._control.send(("close",))
            except (OSError, EOFError):
                pass
            finally:
                program._control_lock.release()
    deadline = time.monotonic() + _EXIT_WAIT_SECONDS
    for program in programs:
        try:
            program._process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            program._process.kill()
            program._process.wait()


def _stop(process: subprocess.Popen[bytes], control: Connection,
          workers: list[tuple[Connection, SharedBuffer]]) -> None:
    """Ask the worker process to end, then make sure it does; release both ends' resources."""
    try:
        control.send(("close",))
        process.wait(_CLOSE_WAIT_SECONDS)
    except (OSError, EOFError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
    for sock, buffer in workers:
        sock.close()
        buffer.close()
    control.close()


def _plugin_spec(registry: DeviceRegistry, device: str) -> tuple[tuple[str, str], str]:
    plugin, full = registry.resolve(device)
    cls = type(plugin)
    return (cls.__module__, cls.__qualname__), full


def _save_for_worker(model: ir.Model, folder: str) -> str:
    """``model`` saved in ``folder`` with its weights in one external data file; its path.

    ``ir.save(model, path, external_data=...)`` would swap the model's weights
    for views of the file while it writes: other members compile the same model
    on other threads meanwhile (MULTI compiles them at once), and would read
    those views, or hash them for the model cache.  The model is only read here:
    its protobuf without weights, and the weights written beside it.
    """
    import onnx
    import onnx_ir as ir

    from inferplex._serialize import serialize_leaving_out

    proto, weights = serialize_leaving_out(model, lambda value: True)
    tensors = [value.const_value for value in weights]
    external = ir.external_data.convert_tensors_to_external(
        tensors, folder, "model.onnx.data")  # type: ignore[arg-type]
    for value, tensor in zip(weights, external, strict=True):
        tensor.name = value.name or ""
        proto.graph.initializer.append(ir.serde.serialize_tensor(tensor))
    path = os.path.join(folder, "model.onnx")
    onnx.save(proto, path)
    return path


def compile_in_worker_process(registry: DeviceRegistry, model: ir.Model, device: str,
                              config: Mapping[str, Any], cache_dir: str = "") -> WorkerProcessProgram:
    """Compile ``model`` for ``device`` in a new worker process (its plugin class made again there).

    ``config`` is the member config (already validated, ``CACHE_DIR`` left out).
    ``cache_dir``: the worker process compiles through this model cache
    (:func:`inferplex.devices.cache.compile_through_cache`); the program's
    ``loaded_from_cache`` says whether its entry was used.  Raises CompileError
    with the worker's reason when it cannot compile.
    """

    spec, full = _plugin_spec(registry, device)
    ours, theirs = socket.socketpair()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    with tempfile.TemporaryDirectory(prefix="inferplex-worker-") as folder:
        path = _save_for_worker(model, folder)
        process = subprocess.Popen(  # noqa: S603 - our own module, with this interpreter
            [sys.executable, "-m", "inferplex.devices.remote.child", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env, start_new_session=True)
        theirs.close()
        control = Connection(os.dup(ours.fileno()))
        try:
            control.send(("compile", spec, path, full, dict(config), cache_dir))
            reply = control.recv()
        except (EOFError, OSError) as error:
            process.kill()
            process.wait()
            control.close()
            ours.close()
            raise CompileError(f"the worker process for {full} ended while compiling "
                               f"(exit code {process.returncode})") from error
    if reply[0] == "error":
        try:
            process.wait(_CLOSE_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        control.close()
        ours.close()
        raise error_from(full, reply[1], reply[2])
    workers: list[tuple[Connection, SharedBuffer]] = []
    passed: list[int] = []
    for _ in range(int(reply[1])):
        mine, other = socket.socketpair()
        buffer = SharedBuffer(new_buffer_fd())
        workers.append((Connection(mine.detach()), buffer))
        passed += [other.detach(), buffer.fd]
    socket.send_fds(ours, [b"workers"], passed)
    for fd in passed[0::2]:
        os.close(fd)
    ours.close()
    program = WorkerProcessProgram(full, process, control, workers, bool(config.get("ENABLE_PROFILING")))
    program.loaded_from_cache = bool(reply[2])
    return program
