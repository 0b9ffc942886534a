"""First-inference time (compile_model + first infer) with a warm model cache against a cold one.

Per device: the CPU on each engine (OpenVINO, ONNX Runtime), an emulated or real
GPU, and AUTO; beside them raw OpenVINO with its own CACHE_DIR on the CPU.
Each figure is the median of ``--repeat`` runs, each in a fresh Core (OpenVINO:
a fresh ``openvino.Core``) so nothing is kept in memory between runs; "cold"
uses an empty cache directory each time, "warm" one filled by a previous run.
Prints seconds and the cold/warm ratio.

    INFERPLEX_EMULATED_GPUS=1 python bench/cache.py --model light_resnet50 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx.backend.test.loader

import inferplex as ov

_LIGHT = Path(onnx.backend.test.loader.DATA_DIR) / "light"


def _first_inference(run: Callable[[str], None], cache: str) -> float:
    start = time.perf_counter()
    run(cache)
    return time.perf_counter() - start


def _measure(run: Callable[[str], None], repeat: int) -> tuple[float, float]:
    """Median seconds cold and warm."""
    cold, warm = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as folder:
            cold.append(_first_inference(run, folder))
            warm.append(_first_inference(run, folder))
    return statistics.median(cold), statistics.median(warm)


def _inferplex(data: bytes, device: str, config: dict, feed: np.ndarray) -> Callable[[str], None]:
    def run(cache: str) -> None:
        compiled = ov.Core().compile_model(data, device, {**config, "CACHE_DIR": cache})
        request = compiled.create_infer_request()
        request.infer({0: feed})
        compiled.release()

    return run


def _openvino(data: bytes, feed: np.ndarray) -> Callable[[str], None]:
    import openvino

    def run(cache: str) -> None:
        core = openvino.Core()
        core.set_property({"CACHE_DIR": cache})
        compiled = core.compile_model(core.read_model(data, b""), "CPU")
        compiled.create_infer_request().infer({0: feed})

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="light_squeezenet", help="a model of onnx's backend 'light' data")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = (_LIGHT / f"{args.model}.onnx").read_bytes()
    model = ov.Core().read_model(data)
    shape = [d if isinstance(d, int) else 1 for d in model.inputs[0].shape]
    feed = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    gpus = [d for d in ov.Core().available_devices if d.startswith("GPU")]
    cases: list[tuple[str, Callable[[str], None]]] = [
        ("inferplex CPU (OpenVINO engine)", _inferplex(data, "CPU", {"ENGINE": "OPENVINO"}, feed)),
        ("inferplex CPU (ONNX Runtime engine)", _inferplex(data, "CPU", {"ENGINE": "ONNXRUNTIME"}, feed)),
        *([(f"inferplex {gpus[0]}", _inferplex(data, gpus[0], {}, feed))] if gpus else []),
        ("inferplex AUTO", _inferplex(data, "AUTO", {}, feed)),
        ("raw OpenVINO CPU, its CACHE_DIR", _openvino(data, feed)),
    ]
    print(f"{args.model}, median of {args.repeat}; first inference = compile_model + one infer")
    print(f"{'device':40} {'cold s':>8} {'warm s':>8} {'cold/warm':>10}")
    for label, run in cases:
        try:
            with tempfile.TemporaryDirectory() as folder:  # imports and one-off set-up out of the figures
                run(folder)
            cold, warm = _measure(run, args.repeat)
        except Exception as error:  # noqa: BLE001 - one failing device must not hide the others
            print(f"{label:40} failed: {type(error).__name__}: {str(error)[:120]}")
            continue
        print(f"{label:40} {cold:8.3f} {warm:8.3f} {cold / warm:9.2f}x")


if __name__ == "__main__":
    main()
