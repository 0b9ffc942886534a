"""The worker process: ``python -m inferplex.devices.remote.child FD`` (started by parent.py).

Compiles the model it is sent (through the model cache when the caller has
``CACHE_DIR``), answers with its number of request slots
(``REQUESTS_PER_WORKER`` per program worker), receives one socket and one
shared buffer per slot, then serves each slot on a thread of its own until the
caller closes the program or goes away.  A slot takes any free program worker,
so a request waits here, next to the device, rather than for a round trip to
the caller while a worker idles; and it hands the worker on as soon as its run
is queued on the device (``run_into``'s ``queued``: a GPU stream runs the next
run behind it), not when the run has ended.  Each shared buffer is offered to
the program's ``pin_host_memory`` (page-locked for a CUDA GPU), so inputs go
from it to the device, and outputs from the device into it (``run_into``), with
no copy on this side.
"""

from __future__ import annotations

import functools
import importlib
import os
import queue
import socket
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from inferplex.devices.base import CallOnce, DeviceProgram
from inferplex.devices.remote.buffers import OutputPlacement, SharedBuffer, read_arrays

REQUESTS_PER_WORKER = 2
"""Request slots per program worker: one running, one queued behind it (or ready to start when it ends)."""


def _load_plugin(spec: tuple[str, str]) -> Any:
    module, qualname = spec
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target()


def _compile(message: tuple[Any, ...]) -> tuple[DeviceProgram, bool]:
    """The program, and whether it came from the model cache (``CACHE_DIR``, checked here as in
    the caller: entries are loaded only after their owner, key and checksum are)."""
    import onnx_ir as ir

    from inferplex.devices.cache import compile_through_cache

    _, spec, path, device, config, cache_dir = message
    plugin, model = _load_plugin(spec), ir.load(path)
    if not cache_dir:
        return plugin.compile(model, device, config), False
    return compile_through_cache(plugin, model, device, config, cache_dir,
                                 lambda: plugin.compile(model, device, config))


def _serve(program: DeviceProgram, free: queue.SimpleQueue[int], sock: Connection,
           buffer: SharedBuffer, profiling: bool) -> None:
    while True:
        try:
            _, size, described, end = sock.recv()
        except (EOFError, OSError):
            return
        try:
            buffer.follow(size)
            inputs = read_arrays(buffer, described, copy=False)
            placement = OutputPlacement(buffer, end)  # outputs go after the inputs
            worker = free.get()
            hand_on = CallOnce(functools.partial(free.put, worker))
            try:
                # The worker's next run may queue behind this one (not while profiling: the
                # records read below are this run's only while the worker runs nothing else).
                outputs = program.run_into(inputs, worker, placement, None if profiling else hand_on)
                records = program.profiling_info(worker) if profiling else None
            finally:
                hand_on()
            del inputs
            placed = placement.describe(outputs)
            del outputs, placement  # views of the buffer: a later growth may then unmap it at once
            reply: tuple[Any, ...] = ("ok", buffer.size, placed, records)
        except BaseException as error:  # noqa: BLE001 - every request gets an answer
            reply = ("error", type(error).__name__, str(error))
        try:
            sock.send(reply)
        except (EOFError, OSError):
            return
        except Exception as error:  # noqa: BLE001 - a reply that cannot be pickled still answers
            sock.send(("error", "InferenceError", f"the worker process could not send its result back: "
                                                  f"{type(error).__name__}: {error}"))


def main() -> int:
    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    control = Connection(os.dup(fd))
    message = control.recv()
    try:
        program, loaded = _compile(message)
        workers = int(program.num_workers)
    except BaseException as error:  # noqa: BLE001 - reported to the caller, who raises it
        control.send(("error", type(error).__name__, str(error)))
        return 1
    profiling = bool(message[4].get("ENABLE_PROFILING"))
    slots = REQUESTS_PER_WORKER * workers
    control.send(("ready", slots, loaded))
    _, fds, _, _ = socket.recv_fds(sock, 64, 2 * slots)
    sock.close()
    free: queue.SimpleQueue[int] = queue.SimpleQueue()
    for worker in range(workers):
        free.put(worker)
    for index in range(slots):
        slot = Connection(fds[2 * index])
        buffer = SharedBuffer(fds[2 * index + 1], pin=program.pin_host_memory)
        threading.Thread(target=_serve, args=(program, free, slot, buffer, profiling),
                         name=f"inferplex-slot-{index}", daemon=True).start()
    while True:
        try:
            request = control.recv()
        except (EOFError, OSError):
            break
        if request[0] == "close":
            break
        try:
            if request[0] == "property_names":
                reply: tuple[Any, ...] = ("ok", list(program.property_names()))
            else:
                reply = ("ok", program.get_property(request[1]))
        except BaseException as error:  # noqa: BLE001
            reply = ("error", type(error).__name__, str(error))
        control.send(reply)
    program.close()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # serving threads may still block in recv: do not wait for them
