"""Threads and memory across drop loops, and how long exit takes with a hung device.

For each device string, one compiled model is made, used (an AsyncInferQueue
of 2 jobs, 4 requests) and dropped, then 30 more; the thread count and RSS
are printed before and after, for ``release()`` and for plain garbage
collection.  Then a child process starts one request on a device whose run
never returns and exits: the seconds until the process is gone are printed,
with ``EXIT_TIMEOUT`` 1 s and with the default.

    INFERPLEX_EMULATED_GPUS=2 python bench/lifecycle.py
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

import inferplex as ov

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _model() -> object:
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["s"], name="add"),
                               helper.make_node("Relu", ["s"], ["y"], name="relu")], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _settle(target: int) -> int:
    deadline = time.monotonic() + 10
    while threading.active_count() > target and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    return threading.active_count()


def drop_loop(core: ov.Core, device: str, release: bool) -> tuple[int, int, float, float]:
    model, x = _model(), {"x": np.ones((2, 8), np.float32)}

    def use() -> None:
        compiled = core.compile_model(model, device)
        queue = ov.AsyncInferQueue(compiled, 2)
        for _ in range(4):
            queue.start_async(x)
        queue.wait_all()
        if release:
            compiled.release()

    use()
    gc.collect()
    threads, rss = _settle(0), _rss_mb()
    for _ in range(30):
        use()
    return threads, _settle(threads), rss, _rss_mb()


def exit_seconds(exit_timeout: float | None) -> float:
    config = "None" if exit_timeout is None else f"{{'EXIT_TIMEOUT': {exit_timeout}}}"
    script = textwrap.dedent(f"""
        import threading, numpy as np, inferplex as ov
        from hooked_plugin import hooked_compile
        from test_lifecycle import MODEL, X
        hang, calls = threading.Event(), []
        def stuck(inputs, worker):
            calls.append(1)
            if len(calls) > 1:
                hang.wait()
        compiled = hooked_compile(MODEL, {config}, stuck)
        compiled({{"x": X}})
        compiled.create_infer_request().start_async({{"x": X}})
        import time; print("main code done", time.monotonic(), flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    end = time.monotonic()
    line = next(x for x in done.stdout.splitlines() if x.startswith("main code done"))
    return end - float(line.split()[-1])


def main() -> None:
    core = ov.Core()
    gpus = any(d.startswith("GPU") for d in core.available_devices)
    devices = ["CPU"] + [d for d in ("HETERO:GPU.0,CPU", "MULTI:GPU.0,CPU") if gpus]
    print(f"{'device':<20} {'how':<10} {'threads':>14} {'RSS MB':>18}")
    for device in devices:
        for release in (True, False):
            before, after, rss_before, rss_after = drop_loop(core, device, release)
            how = "release" if release else "gc"
            print(f"{device:<20} {how:<10} {before:>6} -> {after:<5} "
                  f"{rss_before:>8.1f} -> {rss_after:<8.1f}")
    for timeout in (1.0, None):
        label = "default (5 s)" if timeout is None else f"{timeout:g} s"
        seconds = exit_seconds(timeout)
        print(f"exit with a hung device, EXIT_TIMEOUT {label}: {seconds:.2f} s after the main code")


if __name__ == "__main__":
    main()
